/**
 * Issue 20: `template.header.link` said "a public URL" but took `http://169.254.169.254/...` (a cloud
 * metadata service) and any other private address. It must be https to a host that is not an IP
 * literal of a private, loopback or link-local range.
 */
import { describe, expect, test } from "bun:test";
import { publicHttpsUrlProblem } from "../../src/lib/public-url.ts";

describe("publicHttpsUrlProblem", () => {
  const refused = [
    "http://example.com/a.pdf",
    "ftp://example.com/a.pdf",
    "https://169.254.169.254/latest/meta-data/",
    "https://127.0.0.1/a.pdf",
    "https://2130706433/a.pdf",
    "https://0x7f.1/a.pdf",
    "https://10.1.2.3/a.pdf",
    "https://172.16.0.1/a.pdf",
    "https://172.31.255.255/a.pdf",
    "https://192.168.1.1/a.pdf",
    "https://100.64.0.1/a.pdf",
    "https://0.0.0.0/a.pdf",
    "https://224.0.0.1/a.pdf",
    "https://[::1]/a.pdf",
    "https://[::]/a.pdf",
    "https://[fe80::1]/a.pdf",
    "https://[fd00::1]/a.pdf",
    "https://[::ffff:169.254.169.254]/a.pdf",
    "https://[::ffff:10.0.0.1]/a.pdf",
    "https://[64:ff9b::a9fe:a9fe]/a.pdf",
    "https://localhost/a.pdf",
    "https://api.localhost/a.pdf",
    "https://user:pass@example.com/a.pdf",
    "not a url",
  ];
  const taken = [
    "https://example.com/a.pdf",
    "https://cdn.example.com:8443/files/a.pdf?sig=1",
    "https://8.8.8.8/a.pdf",
    "https://172.32.0.1/a.pdf",
    "https://[2001:db8::1]/a.pdf",
    "https://[::ffff:8.8.8.8]/a.pdf",
  ];
  test("refuses what is not https to a public host", () => {
    for (const url of refused)
      expect({ url, problem: publicHttpsUrlProblem(url) }).toEqual({ url, problem: expect.any(String) });
  });
  test("takes https to public hosts", () => {
    for (const url of taken)
      expect({ url, problem: publicHttpsUrlProblem(url) }).toEqual({ url, problem: undefined });
  });
});
