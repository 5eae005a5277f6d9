import { ApiError } from "./errors.ts";
import type { Scope, TokenResponse } from "./types.ts";

export interface RetryOptions {
  /** Attempts of one call on 503 (and 502/504) and network errors, the first included. Default 5. */
  maxAttempts?: number;
  /**
   * Retries of one call on 429 `rate_limit_exceeded`. Each waits `Retry-After` (1 s when absent) plus
   * a random jitter of up to 1 s, or up to 20 % of `Retry-After` when that is longer, so that callers
   * told the same `Retry-After` do not all come back at the same instant; and never longer than
   * `maxRateLimitDelayMs`. Default 10.
   */
  maxRateLimitRetries?: number;
  /**
   * Cap of one wait on 429 `rate_limit_exceeded`, jitter included: a longer `Retry-After` waits this
   * long, then retries (and is told again if the limit still holds). Default 60 000.
   */
  maxRateLimitDelayMs?: number;
  /** Backoff base: attempt n waits a random time in [0, min(maxDelayMs, baseDelayMs * 2^n)). Default 250. */
  baseDelayMs?: number;
  /** Backoff cap. Default 10 000. */
  maxDelayMs?: number;
}

export interface TransportOptions {
  baseUrl: string;
  clientId: string;
  clientSecret: string;
  scopes?: Scope[];
  retry?: RetryOptions;
  /** Renew the token this many seconds before it expires. Default 60. */
  tokenRenewMarginSeconds?: number;
  /** Replaces the global fetch (a proxy agent, instrumentation). */
  fetch?: FetchLike;
  /** Milliseconds since the epoch; replaces Date.now for token expiry. */
  now?: () => number;
}

export interface RequestOptions {
  query?: Record<string, string | number | undefined>;
  json?: unknown;
  form?: FormData;
  headers?: Record<string, string>;
  signal?: AbortSignal;
}

/** The part of fetch the SDK uses. */
export type FetchLike = (input: string | URL, init?: RequestInit) => Promise<Response>;

interface Token {
  value: string;
  /** Epoch ms after which it is renewed before use. */
  renewAt: number;
}

/** The jitter added to a 429 wait: up to this many ms, or `RATE_LIMIT_JITTER_RATIO` of the wait if longer. */
const RATE_LIMIT_JITTER_MS = 1_000;
const RATE_LIMIT_JITTER_RATIO = 0.2;

/**
 * A redirect answer. Credentials (the client secret in the token request body, the bearer token of
 * an API call) are never sent after a redirect, so every request uses `redirect: "manual"` and gets
 * the 3xx itself: in Bun and Node a 301/302/303/307/308 (or 300) with its `Location`; in browsers an
 * `opaqueredirect` response with status 0. 304 Not Modified is not a redirect.
 */
function isRedirect(response: Response): boolean {
  if (response.type === "opaqueredirect") return true;
  return response.status >= 300 && response.status < 400 && response.status !== 304;
}

/**
 * Network errors thrown after their call's retries ran out. The token request retries on its own; an
 * API call waiting for that token must not retry the same failure again (5 token attempts for each of
 * its 5 attempts: minutes, not seconds, before an unreachable API is reported).
 */
const retriesSpent = new WeakSet<object>();

/** Statuses a retry may cure: the service (or a proxy before it) could not take the request now. */
const TRANSIENT_STATUSES = new Set([502, 503, 504]);

/** Waits `ms`; rejects with the signal's reason as soon as it aborts. */
export const sleep = (ms: number, signal?: AbortSignal) =>
  new Promise<void>((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    signal?.addEventListener("abort", onAbort, { once: true });
  });

/** `promise`, or the signal's reason if it aborts first; the listener goes when either settles. */
function untilAborted<T>(promise: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(signal.reason);
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener("abort", onAbort, { once: true });
    promise.then(resolve, reject).finally(() => signal.removeEventListener("abort", onAbort));
  });
}

/**
 * Every HTTP call of the SDK: the bearer token (fetched on first use, renewed before it expires and
 * once on a 401, one request shared by concurrent callers) and the retries (429 after Retry-After,
 * 503 and network errors with exponential backoff and full jitter).
 */
export class Transport {
  private readonly baseUrl: string;
  private readonly fetch: FetchLike;
  private readonly now: () => number;
  private readonly retry: Required<RetryOptions>;
  private readonly marginMs: number;
  /** The options without the secret. */
  private readonly options: Omit<TransportOptions, "clientSecret">;
  // The secret and the token live in ECMAScript private fields: unlike TypeScript's `private`, they
  // are not properties, so console.log, util.inspect, JSON.stringify and Object.keys never see them.
  readonly #secret: string;
  #token: Token | undefined;
  #tokenInFlight: Promise<Token> | undefined;

  constructor(options: TransportOptions) {
    const { clientSecret, ...rest } = options;
    this.#secret = clientSecret;
    this.options = rest;
    this.baseUrl = options.baseUrl.replace(/\/+$/, "");
    this.fetch = options.fetch ?? ((input, init) => globalThis.fetch(input, init));
    this.now = options.now ?? Date.now;
    this.retry = {
      maxAttempts: 5,
      maxRateLimitRetries: 10,
      maxRateLimitDelayMs: 60_000,
      baseDelayMs: 250,
      maxDelayMs: 10_000,
      ...options.retry,
    };
    this.marginMs = (options.tokenRenewMarginSeconds ?? 60) * 1000;
  }

  /** An authenticated API call; resolves with the parsed JSON body of a 2xx answer. */
  async request<T>(method: string, path: string, options: RequestOptions = {}): Promise<T> {
    let renewedAfter401 = false;
    const body = await this.withRetries(options.signal, async () => {
      const token = await this.currentToken(options.signal);
      const response = await this.send(method, path, options, token.value);
      if (response.status === 401 && !renewedAfter401) {
        // A token the server no longer takes (expired early, secret rotated): renew once, retry.
        renewedAfter401 = true;
        if (this.#token === token) this.#token = undefined;
        await response.body?.cancel();
        return { retryNow: true };
      }
      return { response };
    });
    return body as T;
  }

  /** The bearer token itself, as the next call would send it (MessagingClient.accessToken). */
  async accessToken(signal?: AbortSignal): Promise<string> {
    return (await this.currentToken(signal)).value;
  }

  /** The current token, fetching one when there is none or it is about to expire. */
  private currentToken(signal?: AbortSignal): Promise<Token> {
    if (this.#token && this.now() < this.#token.renewAt) return Promise.resolve(this.#token);
    // Single flight: every caller waiting for a token waits for the same request. It is not tied
    // to one caller's signal, since the others still want it.
    this.#tokenInFlight ??= this.fetchToken().finally(() => {
      this.#tokenInFlight = undefined;
    });
    return signal ? untilAborted(this.#tokenInFlight, signal) : this.#tokenInFlight;
  }

  private async fetchToken(): Promise<Token> {
    const body = await this.withRetries(undefined, async () => {
      const response = await this.fetch(`${this.baseUrl}/oauth/token`, {
        method: "POST",
        headers: { "content-type": "application/json", accept: "application/json" },
        body: JSON.stringify({
          grant_type: "client_credentials",
          client_id: this.options.clientId,
          client_secret: this.#secret,
          ...(this.options.scopes && { scope: this.options.scopes.join(" ") }),
        }),
        // The body carries the secret: a redirect is never followed (withRetries throws on it).
        redirect: "manual",
      });
      return { response };
    });
    const token = body as TokenResponse;
    const lifetimeMs = token.expires_in * 1000;
    // A margin larger than a tenth of the lifetime would renew on every call of a short-lived token.
    const margin = Math.min(this.marginMs, lifetimeMs / 10);
    this.#token = { value: token.access_token, renewAt: this.now() + lifetimeMs - margin };
    return this.#token;
  }

  private send(method: string, path: string, options: RequestOptions, token: string): Promise<Response> {
    const url = new URL(`${this.baseUrl}${path}`);
    for (const [name, value] of Object.entries(options.query ?? {})) {
      if (value !== undefined) url.searchParams.set(name, String(value));
    }
    const headers: Record<string, string> = {
      accept: "application/json",
      authorization: `Bearer ${token}`,
      ...options.headers,
    };
    let body: BodyInit | undefined;
    if (options.json !== undefined) {
      headers["content-type"] = "application/json";
      body = JSON.stringify(options.json);
    } else if (options.form) {
      body = options.form;
    }
    // The bearer token goes to the API's origin only: a redirect is thrown, never followed.
    return this.fetch(url, { method, headers, body, signal: options.signal, redirect: "manual" });
  }

  /**
   * Runs `attempt` until it gives a 2xx answer (parsed JSON is returned) or an error that retrying
   * does not cure (thrown as ApiError; a redirect is one). `retryNow` asks for another attempt at once.
   */
  private async withRetries(
    signal: AbortSignal | undefined,
    attempt: () => Promise<{ response: Response } | { retryNow: true }>,
  ): Promise<unknown> {
    let transientFailures = 0;
    let rateLimited = 0;
    for (;;) {
      let outcome: { response: Response } | { retryNow: true };
      try {
        outcome = await attempt();
      } catch (error) {
        // The caller's abort, or an error of ours: not a network failure to retry; nor one the token
        // request already retried.
        if (signal?.aborted || !isNetworkError(error) || retriesSpent.has(error)) throw error;
        transientFailures++;
        if (transientFailures >= this.retry.maxAttempts) {
          retriesSpent.add(error);
          throw error;
        }
        await sleep(this.backoffMs(transientFailures), signal);
        continue;
      }
      if ("retryNow" in outcome) continue;
      const { response } = outcome;
      if (isRedirect(response)) {
        await response.body?.cancel();
        throw ApiError.fromRedirect(response);
      }
      const text = await response.text();
      if (response.ok) return text ? JSON.parse(text) : undefined;
      const error = ApiError.fromResponse(response, text);
      if (response.status === 429 && error.code === "rate_limit_exceeded") {
        rateLimited++;
        if (rateLimited > this.retry.maxRateLimitRetries) throw error;
        await sleep(this.rateLimitDelayMs(error.retryAfter), signal);
        continue;
      }
      if (TRANSIENT_STATUSES.has(response.status)) {
        transientFailures++;
        if (transientFailures >= this.retry.maxAttempts) throw error;
        const backoff = this.backoffMs(transientFailures);
        // A long Retry-After on a 5xx is capped like a 429 wait.
        await sleep(
          Math.min(this.retry.maxRateLimitDelayMs, Math.max(backoff, (error.retryAfter ?? 0) * 1000)),
          signal,
        );
        continue;
      }
      // quota_exceeded (a wait until midnight is the caller's decision), 4xx, 500: thrown at once.
      throw error;
    }
  }

  /**
   * The wait after a 429 `rate_limit_exceeded`: `Retry-After` (1 s when absent) plus a random jitter
   * of up to 1 s or 20 % of it (the longer), capped at `maxRateLimitDelayMs`.
   */
  private rateLimitDelayMs(retryAfterSeconds: number | null): number {
    const waitMs = (retryAfterSeconds ?? 1) * 1000;
    const jitterMs = Math.random() * Math.max(RATE_LIMIT_JITTER_MS, waitMs * RATE_LIMIT_JITTER_RATIO);
    return Math.min(this.retry.maxRateLimitDelayMs, waitMs + jitterMs);
  }

  /** Exponential backoff with full jitter. */
  private backoffMs(failures: number): number {
    const ceiling = Math.min(this.retry.maxDelayMs, this.retry.baseDelayMs * 2 ** (failures - 1));
    return Math.random() * ceiling;
  }
}

/**
 * fetch rejects with a TypeError when the connection fails or drops (both in Node and Bun). An
 * ApiError (it has a `code` too) is an answer, already retried as far as it should be: the token
 * request's own errors (a redirect, invalid_client) reach an API call's loop through currentToken.
 */
function isNetworkError(error: unknown): error is Error {
  if (!(error instanceof Error) || error instanceof ApiError) return false;
  if (error.name === "AbortError" || error.name === "TimeoutError") return false;
  return error instanceof TypeError || "code" in error;
}
