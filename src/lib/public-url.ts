import { isIP } from "node:net";

/**
 * Whether a URL given to us to fetch from (a template header's media link; later a webhook endpoint)
 * points at the public internet: https, no credentials, and not a host that names this machine or a
 * private network by itself: `localhost`, or an IP literal of a loopback, private, link-local,
 * shared (CGNAT), multicast or reserved range. The WHATWG URL parser has already turned the odd
 * spellings of an address (`2130706433`, `0x7f.1`, a trailing dot) into the dotted form.
 * A name that resolves to such an address is the fetcher's to check, after DNS.
 */
export function publicHttpsUrlProblem(text: string): string | undefined {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    return "is not a URL";
  }
  if (url.protocol !== "https:") return "must be an https URL";
  if (url.username !== "" || url.password !== "") return "must not carry credentials";
  const host = url.hostname.replace(/^\[|\]$/g, "").toLowerCase();
  if (host === "localhost" || host.endsWith(".localhost")) return "must not name this machine";
  if (isPrivateAddress(host)) return "must not be a private, loopback or link-local address";
  return undefined;
}

/** IPv4 ranges that are not the public internet: [first address, prefix length]. */
const IPV4_NON_PUBLIC: [string, number][] = [
  ["0.0.0.0", 8], // "this network"
  ["10.0.0.0", 8],
  ["100.64.0.0", 10], // shared address space (CGNAT)
  ["127.0.0.0", 8],
  ["169.254.0.0", 16], // link-local (cloud metadata services)
  ["172.16.0.0", 12],
  ["192.0.0.0", 24],
  ["192.168.0.0", 16],
  ["198.18.0.0", 15], // benchmarking
  ["224.0.0.0", 4], // multicast
  ["240.0.0.0", 4], // reserved, broadcast
];

/** True for an IP literal (v4 or v6) in a range that is not the public internet; false for a name. */
export function isPrivateAddress(host: string): boolean {
  const version = isIP(host);
  if (version === 4) return ipv4NonPublic(ipv4ToInt(host));
  if (version !== 6) return false;
  const words = ipv6Words(host);
  if (words.slice(0, 7).every((w) => w === 0) && (words[7] === 0 || words[7] === 1)) return true; // :: and ::1
  const first = words[0] ?? 0;
  if ((first & 0xfe00) === 0xfc00) return true; // unique local fc00::/7
  if ((first & 0xffc0) === 0xfe80) return true; // link-local fe80::/10
  if ((first & 0xff00) === 0xff00) return true; // multicast
  // IPv4 inside IPv6: mapped ::ffff:0:0/96, compatible ::/96, NAT64 64:ff9b::/96.
  const embedsV4 =
    (words.slice(0, 5).every((w) => w === 0) && (words[5] === 0xffff || words[5] === 0)) ||
    (first === 0x64 && words[1] === 0xff9b && words.slice(2, 6).every((w) => w === 0));
  if (embedsV4) return ipv4NonPublic((((words[6] ?? 0) << 16) | (words[7] ?? 0)) >>> 0);
  return false;
}

function ipv4NonPublic(address: number): boolean {
  return IPV4_NON_PUBLIC.some(([base, bits]) => {
    const mask = bits === 0 ? 0 : (~0 << (32 - bits)) >>> 0;
    return (address & mask) >>> 0 === (ipv4ToInt(base) & mask) >>> 0;
  });
}

function ipv4ToInt(address: string): number {
  return address.split(".").reduce((n, part) => ((n << 8) | Number(part)) >>> 0, 0);
}

/** The eight 16-bit words of an IPv6 address (`::` expanded, a dotted IPv4 tail converted). */
function ipv6Words(address: string): number[] {
  let text = address.split("%")[0] ?? "";
  const dotted = /(\d+\.\d+\.\d+\.\d+)$/.exec(text);
  if (dotted?.[1]) {
    const v4 = ipv4ToInt(dotted[1]);
    text = `${text.slice(0, -dotted[1].length)}${(v4 >>> 16).toString(16)}:${(v4 & 0xffff).toString(16)}`;
  }
  const [head = "", tail] = text.split("::");
  const parse = (part: string) => (part === "" ? [] : part.split(":").map((w) => Number.parseInt(w, 16)));
  const left = parse(head);
  const right = tail === undefined ? [] : parse(tail);
  return [...left, ...Array(8 - left.length - right.length).fill(0), ...right];
}
