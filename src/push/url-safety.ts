import { lookup } from "node:dns/promises";
import { isIP } from "node:net";
import { isPrivateAddress, publicHttpsUrlProblem } from "../lib/public-url.ts";
import { withTimeout } from "../lib/with-timeout.ts";

/**
 * Where a webhook endpoint may point (DESIGN §12): https to a public host. An IP literal or a name
 * that resolves to a loopback, private, link-local or unique-local address is refused, on create,
 * on update and again before delivering (a name may be re-pointed after it was accepted: DNS
 * rebinding). A delivery connects to the very addresses that were checked (`PinnedUrl`): nothing
 * resolves the name a second time between the check and the connection. With `allowPrivate`
 * (development, or WEBHOOK_ALLOW_PRIVATE_URLS=1) http and such addresses are allowed; a name must
 * still resolve.
 */

/** Longest URL an endpoint may have. */
export const ENDPOINT_URL_MAX = 2048;
const DNS_TIMEOUT_MS = 3000;

export type AddressLookup = (host: string) => Promise<string[]>;

/** The system resolver: every address of the name, IPv4 and IPv6. */
export const systemLookup: AddressLookup = async (host) =>
  (await lookup(host, { all: true, verbatim: true })).map((entry) => entry.address);

/**
 * An endpoint URL with its host's addresses, all checked: a post goes to `via[0]`, and to the next
 * only when the one before refused the connection. Good for one delivery run or one test event;
 * the next one checks again.
 */
export interface PinnedUrl {
  url: string;
  /** The URL with each checked address in place of the host, in the resolver's order. */
  via: string[];
  /** For a name: the Host header (with a port that is not the default) and the TLS server name. */
  name?: { host: string; serverName: string };
}

/** The verdict on an endpoint URL: where to post, or why not (never naming a resolved address). */
export type UrlCheck = { pinned: PinnedUrl; problem?: undefined } | { pinned?: undefined; problem: string };

/** What is wrong with `text` as an endpoint URL before any DNS, or undefined. */
export function endpointUrlProblem(text: string, allowPrivate: boolean): string | undefined {
  if (text.length > ENDPOINT_URL_MAX) return `must be at most ${ENDPOINT_URL_MAX} characters`;
  if (!allowPrivate) return publicHttpsUrlProblem(text);
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    return "is not a URL";
  }
  if (url.protocol !== "https:" && url.protocol !== "http:") return "must be an http or https URL";
  if (url.username !== "" || url.password !== "") return "must not carry credentials";
  return undefined;
}

/**
 * Checks `text` and resolves its host once: refused when the URL is not allowed, the name does not
 * resolve, or (without `allowPrivate`) any of its addresses is not public. The 400's message says
 * which rule, not the address: the address of a name in someone's private network is not ours to
 * tell.
 */
export async function checkEndpointUrl(
  text: string,
  allowPrivate: boolean,
  resolve: AddressLookup = systemLookup,
): Promise<UrlCheck> {
  const problem = endpointUrlProblem(text, allowPrivate);
  if (problem) return { problem };
  const url = new URL(text);
  const host = url.hostname.replace(/^\[|\]$/g, "");
  // A literal was checked with the URL; nothing to resolve, nothing to pin.
  if (isIP(host)) return { pinned: { url: text, via: [text] } };
  let addresses: string[];
  try {
    addresses = await withTimeout(resolve(host), DNS_TIMEOUT_MS, "DNS lookup timed out");
  } catch {
    addresses = [];
  }
  if (addresses.length === 0) return { problem: `host ${host} does not resolve` };
  if (!allowPrivate && addresses.some((address) => isPrivateAddress(address)))
    return { problem: `host ${host} resolves to a private, loopback or link-local address` };
  return {
    pinned: {
      url: text,
      via: addresses.map((address) => withAddress(url, address)),
      // SNI carries no trailing dot (RFC 6066).
      name: { host: url.host, serverName: host.replace(/\.$/, "") },
    },
  };
}

/** What is wrong with where `text` leads now, after DNS; undefined when it may be posted to. */
export async function endpointAddressProblem(
  text: string,
  allowPrivate: boolean,
  resolve: AddressLookup = systemLookup,
): Promise<string | undefined> {
  return (await checkEndpointUrl(text, allowPrivate, resolve)).problem;
}

/** `url` with `address` for its host (an IPv6 address in brackets, its zone escaped). */
function withAddress(url: URL, address: string): string {
  const host = isIP(address) === 6 ? `[${address.replace("%", "%25")}]` : address;
  return `${url.protocol}//${host}${url.port ? `:${url.port}` : ""}${url.pathname}${url.search}`;
}
