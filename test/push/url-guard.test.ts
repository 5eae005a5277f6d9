/**
 * Issue 42, items 2, 9 and 10: the webhook URL guard (DESIGN §12). A delivery connects to the very
 * address it checked (no second resolution a rebinding name could answer differently), a changed
 * URL and the panel's test event are checked and pinned like a delivery, the special-purpose IPv6
 * ranges count as private, the 400 never names the address a name resolved to, a name that does not
 * resolve is refused in development too, and a wrong scheme is named with the schemes allowed.
 * Real HTTP and TLS servers on this machine; only the resolver is the test's.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createServer as createTcpServer, type Server } from "node:net";
import { hostname } from "node:os";
import { createSecureContext, createServer as createTlsServer } from "node:tls";
import { createApp } from "../../src/app.ts";
import type { AppDeps } from "../../src/app-deps.ts";
import { publicHttpsUrlProblem } from "../../src/lib/public-url.ts";
import { deliverEvent } from "../../src/push/post.ts";
import { sendTestEvent } from "../../src/push/test-event.ts";
import { type AddressLookup, checkEndpointUrl } from "../../src/push/url-safety.ts";
import { call, createTenantWithApp, createTestEnv, getToken, type TestEnv } from "../support/index.ts";

let env: TestEnv;
let token: string;
let tenantId: string;

beforeAll(async () => {
  env = await createTestEnv();
  const created = await createTenantWithApp(env.deps);
  tenantId = created.tenant.id;
  token = await getToken(env.app, created.clientId, created.clientSecret);
});
afterAll(() => env.close());

const SECRET = `whsec_${Buffer.alloc(24, 7).toString("base64")}`;
/** Public by the guard's table and routed nowhere (TEST-NET-1, RFC 5737): a post to it never lands. */
const PUBLIC = "192.0.2.10";

/** A resolver whose answers the test changes; it counts its calls. */
function resolver(first: string[]) {
  let answer = first;
  const lookup = Object.assign(
    async (_host: string) => {
      lookup.calls++;
      return answer;
    },
    {
      calls: 0,
      answer: (next: string[]) => {
        answer = next;
      },
    },
  ) satisfies AddressLookup;
  return lookup;
}

/** The app's dependencies outside development (https to public hosts only), with `lookup`. */
function strictDeps(lookup: AddressLookup): AppDeps {
  return {
    ...env.deps,
    lookup,
    config: { ...env.config, webhooks: { ...env.config.webhooks, allowPrivateUrls: false } },
  };
}

function post(destination: Awaited<ReturnType<typeof checkEndpointUrl>>, timeoutMs = 2000) {
  return deliverEvent({ destination, secrets: [SECRET], timeoutMs }, "evt_guard", "{}", new Date());
}

/** A receiver on 127.0.0.1 that records the Host header of each post. */
function startReceiver() {
  const hosts: string[] = [];
  const server = Bun.serve({
    port: 0,
    hostname: "127.0.0.1",
    fetch(request) {
      hosts.push(request.headers.get("host") ?? "");
      return new Response("ok");
    },
  });
  return { port: server.port, hosts, stop: () => server.stop(true) };
}

describe("special-purpose addresses count as private", () => {
  const inside: [string, string][] = [
    ["6to4", "2002:c0a8:101::1"],
    ["Teredo", "2001:0:4136:e378:8000:63bf:3fff:fdd2"],
    ["SIIT, IPv4-translated", "::ffff:0:a00:1"],
    ["NAT64 local-use", "64:ff9b:1::a00:1"],
    ["site-local", "fec0::1"],
    ["IPv4-mapped private", "::ffff:10.0.0.1"],
    ["IPv4-mapped loopback", "::ffff:127.0.0.1"],
    ["IPv4-compatible", "::a00:1"],
    ["NAT64 of a private IPv4", "64:ff9b::a9fe:a9fe"],
    ["unique-local", "fd12:3456::1"],
    ["link-local", "fe80::1"],
    ["multicast", "ff02::1"],
    ["discard-only", "100::1"],
    ["this network", "0.1.2.3"],
    ["CGNAT", "100.64.1.1"],
    ["benchmarking", "198.18.0.1"],
    ["IETF protocol assignments", "192.0.0.170"],
  ];
  for (const [range, address] of inside) {
    test(`${range} (${address}): refused as a literal and as what a name resolves to`, async () => {
      const literal = address.includes(":") ? `[${address}]` : address;
      expect(publicHttpsUrlProblem(`https://${literal}/hooks`)).toBe(
        "must not be a private, loopback or link-local address",
      );
      const check = await checkEndpointUrl("https://hooks.example.com/x", false, async () => [
        PUBLIC,
        address,
      ]);
      expect(check.problem).toBe(
        "host hooks.example.com resolves to a private, loopback or link-local address",
      );
    });
  }

  test("public addresses, IPv4 inside IPv6 included, are taken", async () => {
    for (const address of ["93.184.215.14", "2606:4700::1111", "::ffff:8.8.8.8", "64:ff9b::808:808"]) {
      const check = await checkEndpointUrl("https://hooks.example.com/x", false, async () => [address]);
      expect({ address, problem: check.problem }).toEqual({ address, problem: undefined });
    }
  });
});

describe("the 400 for a URL", () => {
  test("a name resolving to a private address: the message names the rule, not the address", async () => {
    const strict = createApp(strictDeps(async () => ["10.0.0.1"]));
    const response = await call(strict, "POST", "/v2/webhook_endpoints", {
      token,
      body: { url: "https://inside.example.net/hooks" },
    });
    expect(response.status).toBe(400);
    expect(response.body.error).toMatchObject({
      code: "parameter_invalid",
      param: "url",
      message: "url host inside.example.net resolves to a private, loopback or link-local address.",
    });
    expect(response.text).not.toContain("10.0.0.1");
  });

  test("PATCH to a name resolving privately is checked like a create: 400", async () => {
    const lookup = resolver([PUBLIC]);
    const strict = createApp(strictDeps(lookup));
    const created = await call(strict, "POST", "/v2/webhook_endpoints", {
      token,
      body: { url: "https://hooks.example.org/a" },
    });
    expect(created.status).toBe(201);
    lookup.answer(["fd00::7"]);
    const patched = await call(strict, "PATCH", `/v2/webhook_endpoints/${created.body.id}`, {
      token,
      body: { url: "https://moved.example.org/b" },
    });
    expect(patched.status).toBe(400);
    expect(patched.body.error).toMatchObject({ code: "parameter_invalid", param: "url" });
    expect(patched.body.error.message).toContain("resolves to a private");
    expect(patched.text).not.toContain("fd00::7");
    const after = await call(strict, "GET", `/v2/webhook_endpoints/${created.body.id}`, { token });
    expect(after.body.url).toBe("https://hooks.example.org/a");
  });

  test("in development a host that does not resolve is refused too (RFC 6761 .invalid)", async () => {
    const response = await call(env.app, "POST", "/v2/webhook_endpoints", {
      token,
      body: { url: "http://hooks.nowhere.invalid/x" },
    });
    expect(response.status).toBe(400);
    expect(response.body.error).toMatchObject({
      code: "parameter_invalid",
      param: "url",
      message: "url host hooks.nowhere.invalid does not resolve.",
    });
  });

  test("a wrong scheme is named with the schemes allowed: http or https in development, https outside", async () => {
    const development = await call(env.app, "POST", "/v2/webhook_endpoints", {
      token,
      body: { url: "ftp://hooks.example.com/x" },
    });
    expect(development.status).toBe(400);
    expect(development.body.error.message).toBe("url must be an http or https URL.");
    const strict = await call(createApp(strictDeps(async () => [PUBLIC])), "POST", "/v2/webhook_endpoints", {
      token,
      body: { url: "ftp://hooks.example.com/x" },
    });
    expect(strict.status).toBe(400);
    expect(strict.body.error.message).toBe("url must be an https URL.");
  });
});

describe("a delivery connects to the address it checked", () => {
  let listener: Server;
  let connections = 0;
  beforeAll(async () => {
    // Every interface: whatever this machine's name resolves to, a connection to it lands here.
    listener = createTcpServer((socket) => {
      connections++;
      socket.destroy();
    });
    await new Promise<void>((resolve) => listener.listen(0, resolve));
  });
  afterAll(() => new Promise<void>((resolve) => listener.close(() => resolve())));

  test("DNS rebinding: public at the check, this machine afterwards; nothing reaches this machine", async () => {
    // This machine's own name: the system resolver would lead a post here; the check's says public.
    const port = (listener.address() as { port: number }).port;
    const lookup = resolver([PUBLIC]);
    const destination = await checkEndpointUrl(`https://${hostname()}:${port}/hooks`, false, lookup);
    expect(destination.problem).toBeUndefined();
    lookup.answer(["127.0.0.1"]);
    const outcome = await post(destination, 500);
    expect(outcome.acknowledged).toBe(false);
    expect(connections).toBe(0);
    expect(lookup.calls).toBe(1);
    expect(outcome.error).not.toContain(PUBLIC);
  });

  test("the post goes to the checked address with the URL's host in the Host header", async () => {
    const receiver = startReceiver();
    try {
      const url = `http://hooks.pinned.example:${receiver.port}/in`;
      const outcome = await post(await checkEndpointUrl(url, true, async () => ["127.0.0.1"]));
      expect(outcome).toMatchObject({ acknowledged: true, statusCode: 200 });
      expect(receiver.hosts).toEqual([`hooks.pinned.example:${receiver.port}`]);
    } finally {
      receiver.stop();
    }
  });

  test("an address that refuses the connection: the next checked address is tried", async () => {
    const receiver = startReceiver();
    try {
      const url = `http://two.example:${receiver.port}/in`;
      const outcome = await post(await checkEndpointUrl(url, true, async () => ["127.0.0.2", "127.0.0.1"]));
      expect(outcome).toMatchObject({ acknowledged: true, statusCode: 200 });
      expect(receiver.hosts).toHaveLength(1);
    } finally {
      receiver.stop();
    }
  });

  test("https: the TLS server name is the URL's host and the certificate is checked", async () => {
    const names: string[] = [];
    const context = createSecureContext({ key: TEST_KEY, cert: TEST_CERT });
    const server = createTlsServer(
      {
        key: TEST_KEY,
        cert: TEST_CERT,
        SNICallback: (name, done) => {
          names.push(name);
          done(null, context);
        },
      },
      (socket) => socket.end(),
    );
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    try {
      const port = (server.address() as { port: number }).port;
      const url = `https://hooks.test:${port}/in`;
      const outcome = await post(await checkEndpointUrl(url, true, async () => ["127.0.0.1"]));
      expect(names).toEqual(["hooks.test"]);
      // Self-signed: refused, the connection to the address notwithstanding.
      expect(outcome.acknowledged).toBe(false);
      expect(outcome.error).toContain("self signed certificate");
    } finally {
      server.close();
    }
  });
});

describe("the panel's test event is checked and pinned like a delivery", () => {
  test("a name re-pointed to a private address since the endpoint was made: not posted", async () => {
    const lookup = resolver([PUBLIC]);
    const strict = strictDeps(lookup);
    const created = await call(createApp(strict), "POST", "/v2/webhook_endpoints", {
      token,
      body: { url: "https://rebinding.example.com/hooks" },
    });
    expect(created.status).toBe(201);
    lookup.answer(["169.254.169.254"]);
    const attempt = await sendTestEvent(strict, tenantId, created.body.id);
    expect(attempt).toMatchObject({ outcome: "failed", status_code: null });
    expect(attempt.error).toBe(
      "not posted: url host rebinding.example.com resolves to a private, loopback or link-local address",
    );
  });

  test("posted to the address its check found", async () => {
    const receiver = startReceiver();
    try {
      const url = `http://test-event.example:${receiver.port}/in`;
      const created = await call(env.app, "POST", "/v2/webhook_endpoints", { token, body: { url } });
      expect(created.status).toBe(201);
      const attempt = await sendTestEvent(
        { ...env.deps, lookup: async () => ["127.0.0.1"] },
        tenantId,
        created.body.id,
      );
      expect(attempt).toMatchObject({ outcome: "acknowledged", status_code: 200 });
      expect(receiver.hosts).toEqual([`test-event.example:${receiver.port}`]);
    } finally {
      receiver.stop();
    }
  });
});

/** A self-signed P-256 certificate for hooks.test (valid until 2126), made with openssl for this test. */
const TEST_KEY = `-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgOHye1G705gCBZBN6
bo32IfYTTPFMIcBIrhiVRfwoZGihRANCAASszm8kV6p3GAL/YamPJ0wCLx+msdKv
VvPB8TFxAQRTltAl2ts/fSODnzazVdkME56saq6X2F1FzrGTycn80iFW
-----END PRIVATE KEY-----
`;
const TEST_CERT = `-----BEGIN CERTIFICATE-----
MIIBmDCCAT6gAwIBAgIUZuWDR4wcFrACH7j0mZW9XXREvMAwCgYIKoZIzj0EAwIw
FTETMBEGA1UEAwwKaG9va3MudGVzdDAgFw0yNjExMjgyMzA1NTRaGA8yMTI2MTEw
NDIzMDU1NFowFTETMBEGA1UEAwwKaG9va3MudGVzdDBZMBMGByqGSM49AgEGCCqG
SM49AwEHA0IABKzObyRXqncYAv9hqY8nTAIvH6ax0q9W88HxMXEBBFOW0CXa2z99
I4OfNrNV2QwTnqxqrpfYXUXOsZPJyfzSIVajajBoMB0GA1UdDgQWBBSW/3a1MYDK
DBqCHSXInTx/5LgfETAfBgNVHSMEGDAWgBSW/3a1MYDKDBqCHSXInTx/5LgfETAP
BgNVHRMBAf8EBTADAQH/MBUGA1UdEQQOMAyCCmhvb2tzLnRlc3QwCgYIKoZIzj0E
AwIDSAAwRQIgI1uV7iqwNvHkzQqt23uK4yIibIucQds7uUNjKfrpmFQCIQCWehf9
F/RbfsALgDdQaOumXxkyldBvanaCZPP7/2Y2vw==
-----END CERTIFICATE-----
`;
