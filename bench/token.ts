/**
 * The benches' one way to an access token: the client-credentials grant of SPEC §2, against a
 * running api (`fetch`) or an app in this process (`app.handle`). A 429 (the token endpoint's
 * per-address limit: a bench asks for many tokens at once), a 5xx or a refused connection (an api
 * still starting) is retried, after the answer's Retry-After or a second, up to `attempts` times.
 */
export async function accessToken(
  base: string,
  credentials: { clientId: string; clientSecret: string },
  options: {
    handle?: (request: Request) => Response | Promise<Response>;
    attempts?: number;
    onRetry?: (why: string) => void;
  } = {},
): Promise<string> {
  const attempts = options.attempts ?? 5;
  for (let attempt = 1; ; attempt++) {
    const request = new Request(`${base}/v2/oauth/token`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        grant_type: "client_credentials",
        client_id: credentials.clientId,
        client_secret: credentials.clientSecret,
      }),
      signal: AbortSignal.timeout(10_000),
    });
    let why: string;
    let waitMs = 1000;
    try {
      const response = await (options.handle ? options.handle(request) : fetch(request));
      const body = (await response.json().catch(() => ({}))) as { access_token?: string };
      if (response.ok && body.access_token) return body.access_token;
      why = `token request answered ${response.status} ${JSON.stringify(body)}`;
      if (response.status !== 429 && response.status < 500) throw new Error(why);
      const retryAfter = Number(response.headers.get("retry-after"));
      if (retryAfter > 0) waitMs = retryAfter * 1000;
    } catch (error) {
      if (error instanceof Error && error.message.startsWith("token request answered")) throw error;
      why = `token request failed: ${(error as Error).message}`;
    }
    if (attempt >= attempts) throw new Error(why);
    options.onRetry?.(`${why}; retrying`);
    await Bun.sleep(waitMs);
  }
}
