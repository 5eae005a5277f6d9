import { lookup } from "node:dns/promises";
import { isIP } from "node:net";
import { isPrivateAddress, publicHttpsUrlProblem } from "../lib/public-url.ts";
import { withTimeout } from "../lib/with-timeout.ts";

/**
 * Where a webhook endpoint may point (DESIGN §12): https to a public host. An IP literal or a name
 * that resolves to a loopback, private, link-local or unique-local address is refused, on create and
 * again before delivering (a name may be re-pointed after it was accepted: DNS rebinding). With
 * `allowPrivate` (development, or WEBHOOK_ALLOW_PRIVATE_URLS=1) http and such addresses are allowed.
 */

/** Longest URL an endpoint may have. */
export const ENDPOINT_URL_MAX = 2048;
const DNS_TIMEOUT_MS = 3000;

export type AddressLookup = (host: string) => Promise<string[]>;

/** The system resolver: every address of the name, IPv4 and IPv6. */
export const systemLookup: AddressLookup = async (host) =>
  (await lookup(host, { all: true, verbatim: true })).map((entry) => entry.address);

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
  if (url.protocol !== "https:" && url.protocol !== "http:") return "must be an https URL";
  if (url.username !== "" || url.password !== "") return "must not carry credentials";
  return undefined;
}

/**
 * What is wrong with where `text` leads now, after DNS: a name that does not resolve, or resolves
 * to any non-public address. Undefined when it may be posted to.
 */
export async function endpointAddressProblem(
  text: string,
  allowPrivate: boolean,
  resolve: AddressLookup = systemLookup,
): Promise<string | undefined> {
  const problem = endpointUrlProblem(text, allowPrivate);
  if (problem || allowPrivate) return problem;
  const host = new URL(text).hostname.replace(/^\[|\]$/g, "");
  if (isIP(host)) return undefined; // a literal: already checked
  let addresses: string[];
  try {
    addresses = await withTimeout(resolve(host), DNS_TIMEOUT_MS, "DNS lookup timed out");
  } catch {
    return `host ${host} does not resolve`;
  }
  if (addresses.length === 0) return `host ${host} does not resolve`;
  const inside = addresses.find((address) => isPrivateAddress(address));
  if (inside) return `host ${host} resolves to a private, loopback or link-local address (${inside})`;
  return undefined;
}
