import { isIP } from "node:net";

/**
 * Whether a URL given to us to fetch from (a template header's media link; later a webhook endpoint)
 * points at the public internet: https, no credentials, and not a host that names this machine or a
 * private network by itself: `localhost`, or an IP literal of a loopback, private, link-local,
 * shared (CGNAT), multicast or reserved range. The WHATWG URL parser has already turned the odd
 * spellings of an address (`2130706433`, `0x7f.1`, a trailing dot) into the dotted form; a name's
 * trailing dot (`localhost.`, the same name) is dropped here. A name that resolves to such an address is the fetcher's to check, after DNS.
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
  const host = url.hostname
    .replace(/^\[|\]$/g, "")
    .replace(/\.$/, "")
    .toLowerCase();
  if (host === "localhost" || host.endsWith(".localhost")) return "must not name this machine";
  if (isPrivateAddress(host)) return "must not be a private, loopback or link-local address";
  return undefined;
}

/**
 * IPv4 ranges that are not the public internet (IANA's special-purpose registry): [first address,
 * prefix length]. The documentation ranges (192.0.2/24 ...) are routed nowhere and left out.
 */
const IPV4_NON_PUBLIC: [string, number][] = [
  ["0.0.0.0", 8], // "this network"
  ["10.0.0.0", 8],
  ["100.64.0.0", 10], // shared address space (CGNAT)
  ["127.0.0.0", 8],
  ["169.254.0.0", 16], // link-local (cloud metadata services)
  ["172.16.0.0", 12],
  ["192.0.0.0", 24], // IETF protocol assignments
  ["192.168.0.0", 16],
  ["198.18.0.0", 15], // benchmarking
  ["224.0.0.0", 4], // multicast
  ["240.0.0.0", 4], // reserved, broadcast
];

/**
 * IPv6 ranges inside global unicast (2000::/3) that are not the public internet; everything outside
 * 2000::/3 is refused as well: ::, ::1, IPv4-compatible ::/96, SIIT ::ffff:0:0:0/96, NAT64 local-use
 * 64:ff9b:1::/48, discard 100::/64, unique-local fc00::/7, link-local fe80::/10, site-local
 * fec0::/10, multicast ff00::/8. The two that carry an IPv4 address to a public host are judged by
 * it: IPv4-mapped ::ffff:a.b.c.d and NAT64 64:ff9b::a.b.c.d.
 */
const IPV6_NON_PUBLIC: [string, number][] = [
  ["2001::", 23], // IETF protocol assignments: Teredo 2001::/32 (a tunnel to any IPv4), benchmarking, ORCHID
  ["2002::", 16], // 6to4: a tunnel to any IPv4 address, private ones too
];

type Range = { base: number[]; bits: number };
const IPV4_RANGES: Range[] = IPV4_NON_PUBLIC.map(([base, bits]) => ({ base: [ipv4ToInt(base)], bits }));
const IPV6_RANGES: Range[] = IPV6_NON_PUBLIC.map(([base, bits]) => ({ base: ipv6Words(base), bits }));
const GLOBAL_UNICAST: Range = { base: [0x2000], bits: 3 };
const IPV4_MAPPED: Range = { base: [0, 0, 0, 0, 0, 0xffff], bits: 96 };
const NAT64: Range = { base: [0x64, 0xff9b, 0, 0, 0, 0], bits: 96 };

/** True for an IP literal (v4 or v6) in a range that is not the public internet; false for a name. */
export function isPrivateAddress(host: string): boolean {
  const version = isIP(host);
  if (version === 4) return ipv4NonPublic(ipv4ToInt(host));
  if (version !== 6) return false;
  const words = ipv6Words(host);
  if (inRange(words, IPV4_MAPPED, 16) || inRange(words, NAT64, 16))
    return ipv4NonPublic((((words[6] ?? 0) << 16) | (words[7] ?? 0)) >>> 0);
  if (!inRange(words, GLOBAL_UNICAST, 16)) return true;
  return IPV6_RANGES.some((range) => inRange(words, range, 16));
}

function ipv4NonPublic(address: number): boolean {
  return IPV4_RANGES.some((range) => inRange([address], range, 32));
}

/** Whether `words` (of `width` bits each) start with the range's first `bits` bits. */
function inRange(words: readonly number[], range: Range, width: 16 | 32): boolean {
  let left = range.bits;
  for (let i = 0; left > 0; i++, left -= width) {
    const take = Math.min(width, left);
    const shift = width - take;
    // Division, not >>: a 32-bit word's top bit would make a shifted value negative.
    if (Math.floor((words[i] ?? 0) / 2 ** shift) !== Math.floor((range.base[i] ?? 0) / 2 ** shift))
      return false;
  }
  return true;
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
