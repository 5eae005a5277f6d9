import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { authenticateClient } from "../../src/applications/service.ts";
import { COMMANDS, USAGE } from "../../src/cli/index.ts";
import { createDb, dropDatabase, ensureDatabase } from "../../src/db/connect.ts";
import { migrate } from "../../src/db/migrate.ts";
import { randomBase62 } from "../../src/ids.ts";

const DATABASE_URL = `postgres://postgres@127.0.0.1:5432/test_cli_${randomBase62(8).toLowerCase()}`;
const env = {
  ...process.env,
  NODE_ENV: "development",
  DATABASE_URL,
  REDIS_PREFIX: "test-cli",
  LOG_LEVEL: "silent",
};

/** Runs the CLI as an operator would, as a process. */
async function cli(...args: string[]) {
  const proc = Bun.spawn(["bun", "src/cli/index.ts", ...args], { env, stdout: "pipe", stderr: "pipe" });
  const [code, stdout, stderr] = await Promise.all([
    proc.exited,
    new Response(proc.stdout).text(),
    new Response(proc.stderr).text(),
  ]);
  return { code, stdout: stdout.trim(), stderr: stderr.trim() };
}

/** Runs `use` on a connection of the test's own to the CLI's database, closed after. */
async function withDb<T>(use: (db: ReturnType<typeof createDb>) => Promise<T>): Promise<T> {
  const db = createDb(DATABASE_URL);
  try {
    return await use(db);
  } finally {
    await db.destroy();
  }
}

beforeAll(() => ensureDatabase(DATABASE_URL));
afterAll(() => dropDatabase(DATABASE_URL));

describe("operator CLI", () => {
  test("db migrate prints one JSON object; a second run applies nothing", async () => {
    const first = await cli("db", "migrate");
    expect(first.code).toBe(0);
    const parsed = JSON.parse(first.stdout);
    expect(parsed.object).toBe("migrations");
    expect(parsed.applied).toContain("001_tenants_applications.sql");
    const second = await cli("db", "migrate");
    expect(JSON.parse(second.stdout)).toEqual({ object: "migrations", applied: [] });
  });

  test("tenant create, app create, rotate-secret, revoke", async () => {
    const tenant = JSON.parse(
      (await cli("tenant", "create", "--name", "Shop", "--daily-quota", "50")).stdout,
    );
    expect(tenant).toEqual({
      object: "tenant",
      id: expect.stringMatching(/^ten_[0-9A-Za-z]{22}$/),
      name: "Shop",
      daily_quota: 50,
      message_retention_days: 400,
    });

    const created = await cli(
      "app",
      "create",
      "--tenant",
      tenant.id,
      "--name",
      "Shop backend",
      "--scopes",
      "messaging:read",
      "--read-limit",
      "50",
    );
    expect(created.code).toBe(0);
    const app = JSON.parse(created.stdout);
    expect({ ...app }).toMatchObject({
      object: "application",
      client_id: expect.stringMatching(/^cid_[0-9A-Za-z]{22}$/),
      client_secret: expect.stringMatching(/^csec_[0-9A-Za-z]{40}$/),
      scopes: "messaging:read",
      tenant: tenant.id,
      read_limit: 50,
      send_limit: 3,
      revoked: false,
    });

    const rotation = await cli("app", "rotate-secret", "--client-id", app.client_id);
    expect(rotation.stderr).toBe("");
    const rotated = JSON.parse(rotation.stdout);
    expect(rotated.client_secret).toMatch(/^csec_/);
    expect(rotated.client_secret).not.toBe(app.client_secret);
    expect(rotated.previous_secret_valid_until).toBeUndefined();

    // --overlap: the replaced secret keeps working that long, and the application says until when.
    const before = Math.floor(Date.now() / 1000);
    const overlapped = JSON.parse(
      (await cli("app", "rotate-secret", "--client-id", app.client_id, "--overlap", "2h")).stdout,
    );
    expect(overlapped.previous_secret_valid_until).toBeGreaterThanOrEqual(before + 7200);
    expect(overlapped.previous_secret_valid_until).toBeLessThanOrEqual(Math.floor(Date.now() / 1000) + 7200);
    const listed = JSON.parse((await cli("app", "list", "--tenant", tenant.id)).stdout);
    expect(listed.data[0].previous_secret_valid_until).toBe(overlapped.previous_secret_valid_until);
    await withDb(async (db) => {
      expect(await authenticateClient(db, app.client_id, app.client_secret)).toBeUndefined();
      expect(await authenticateClient(db, app.client_id, rotated.client_secret)).toBeDefined();
      expect(await authenticateClient(db, app.client_id, overlapped.client_secret)).toBeDefined();
      const later = new Date((overlapped.previous_secret_valid_until + 1) * 1000);
      expect(await authenticateClient(db, app.client_id, rotated.client_secret, later)).toBeUndefined();
      expect(await authenticateClient(db, app.client_id, overlapped.client_secret, later)).toBeDefined();
    });
    const tooLong = await cli("app", "rotate-secret", "--client-id", app.client_id, "--overlap", "31d");
    expect(tooLong.code).toBe(1);
    expect(JSON.parse(tooLong.stderr).error.code).toBe("invalid_flag");

    const revoked = JSON.parse((await cli("app", "revoke", "--client-id", app.client_id)).stdout);
    expect(revoked.revoked).toBe(true);
    expect(revoked.client_secret).toBeUndefined();
  });

  test("tenant retention sets how long messages are kept; a bad duration is refused", async () => {
    const tenant = JSON.parse((await cli("tenant", "create", "--name", "Keeper")).stdout);
    for (const [keep, days] of [
      ["90", 90],
      ["30d", 30],
      ["48h", 2],
    ] as const) {
      const set = await cli("tenant", "retention", "--tenant", tenant.id, "--keep", keep);
      expect(set.code).toBe(0);
      expect(JSON.parse(set.stdout)).toEqual({
        object: "tenant",
        id: tenant.id,
        name: "Keeper",
        message_retention_days: days,
      });
    }
    for (const keep of ["0", "59s", "3651d", "forever", "1.5"]) {
      const refused = await cli("tenant", "retention", "--tenant", tenant.id, "--keep", keep);
      expect(refused.code).not.toBe(0);
      expect(JSON.parse(refused.stderr).error.code).toBe("invalid_flag");
    }
  });

  test("tenant retention refuses less than 2 days (an Idempotency-Key's 24 hours must find its message)", async () => {
    const tenant = JSON.parse((await cli("tenant", "create", "--name", "Short keeper")).stdout);
    for (const keep of ["1", "1d", "12h", "47h", "2879m", "60s"]) {
      const refused = await cli("tenant", "retention", "--tenant", tenant.id, "--keep", keep);
      expect(refused.code).not.toBe(0);
      const { error } = JSON.parse(refused.stderr);
      expect(error.code).toBe("invalid_flag");
      expect(error.message).toContain("at least 2 days");
    }
    await withDb(async (db) => {
      const row = await db
        .selectFrom("tenants")
        .select("message_retention_days")
        .where("id", "=", tenant.id)
        .executeTakeFirstOrThrow();
      expect(row.message_retention_days).toBe(400);
    });
    const least = await cli("tenant", "retention", "--tenant", tenant.id, "--keep", "2880m");
    expect(least.code).toBe(0);
    expect(JSON.parse(least.stdout).message_retention_days).toBe(2);
  });

  test("--help prints the commands, <command> --help its flags, without touching the database", async () => {
    const noDatabase = { ...env, DATABASE_URL: "postgres://postgres@127.0.0.1:9/none" };
    const help = async (...args: string[]) => {
      const proc = Bun.spawn(["bun", "src/cli/index.ts", ...args], { env: noDatabase, stdout: "pipe" });
      const [code, stdout] = await Promise.all([proc.exited, new Response(proc.stdout).text()]);
      return { code, stdout };
    };
    const overview = await help("--help");
    expect(overview.code).toBe(0);
    expect(overview.stdout).toStartWith("Usage: bun run cli <command>");
    for (const command of Object.keys(COMMANDS)) expect(overview.stdout).toContain(`  ${command}  `);
    expect((await help("-h")).stdout).toBe(overview.stdout);

    const create = await help("app", "create", "--help");
    expect(create.code).toBe(0);
    expect(create.stdout).toStartWith(
      "Usage: bun run cli app create --tenant <value> --name <value> [--scopes",
    );
    expect(create.stdout).toMatch(/--tenant +\(required\) the tenant's ten_ id/);

    const group = await help("sender", "--help");
    expect(group.stdout).toContain("sender create");
    expect(group.stdout).not.toContain("tenant create");
  });

  test("every command has its usage (its flags are the ones parsed)", () => {
    expect(Object.keys(USAGE).sort()).toEqual(Object.keys(COMMANDS).sort());
  });

  test("app list --tenant lists the tenant's applications, revoked ones too, never a secret", async () => {
    const tenant = JSON.parse((await cli("tenant", "create", "--name", "Lister")).stdout);
    const first = JSON.parse((await cli("app", "create", "--tenant", tenant.id, "--name", "One")).stdout);
    const second = JSON.parse((await cli("app", "create", "--tenant", tenant.id, "--name", "Two")).stdout);
    await cli("app", "revoke", "--client-id", second.client_id);
    const other = JSON.parse((await cli("tenant", "create", "--name", "Other")).stdout);
    await cli("app", "create", "--tenant", other.id, "--name", "Not mine");

    const listed = await cli("app", "list", "--tenant", tenant.id);
    expect(listed.code).toBe(0);
    const body = JSON.parse(listed.stdout);
    expect(body.object).toBe("list");
    expect(
      body.data.map((a: { client_id: string; revoked: boolean }) => [a.client_id, a.revoked]).sort(),
    ).toEqual(
      [
        [first.client_id, false],
        [second.client_id, true],
      ].sort(),
    );
    expect(listed.stdout).not.toContain("csec_");

    const unknown = await cli("app", "list", "--tenant", "ten_missing");
    expect(unknown.code).not.toBe(0);
    expect(JSON.parse(unknown.stderr).error.code).toBe("tenant_not_found");
  });

  test("failures print a JSON error on stderr and exit non-zero", async () => {
    const cases = [
      await cli("tenant", "create"),
      await cli("app", "create", "--tenant", "ten_missing", "--name", "x"),
      await cli("app", "revoke", "--client-id", "cid_missing"),
      await cli("no", "such", "command"),
      await cli("tenant", "create", "--name", "x", "--bogus-flag", "1"),
    ];
    for (const result of cases) {
      expect(result.code).not.toBe(0);
      expect(result.stdout).toBe("");
      expect(JSON.parse(result.stderr.split("\n").at(-1)!).error.code).toEqual(expect.any(String));
    }
  });

  test("seed creates the demo tenant once", async () => {
    const seeded = await cli("seed");
    expect(seeded.code).toBe(0);
    const seed = JSON.parse(seeded.stdout);
    expect(seed.object).toBe("seed");
    expect(seed.tenant.name).toBe("Demo Shop");
    expect(seed.application.client_secret).toMatch(/^csec_/);
    expect(seed.user).toEqual({
      object: "user",
      id: expect.stringMatching(/^usr_/),
      tenant: seed.tenant.id,
      email: "demo@example.com",
      password: expect.stringMatching(/^[0-9A-Za-z]{16}$/),
    });
    const again = await cli("seed");
    expect(again.code).toBe(1);
    expect(JSON.parse(again.stderr).error.code).toBe("already_seeded");
  });
});

describe("user create", () => {
  const createUser = (tenant: string, email: string, password: string) =>
    cli("user", "create", "--tenant", tenant, "--email", email, "--password", password);

  test("makes a panel user with an argon2id hash; refuses a taken email, a short password, an unknown tenant", async () => {
    const tenant = JSON.parse((await cli("tenant", "create", "--name", "Panel Shop")).stdout);
    const created = await createUser(tenant.id, "Owner@Example.com", "a long enough password");
    expect(created.code).toBe(0);
    const user = JSON.parse(created.stdout);
    expect(user).toEqual({
      object: "user",
      id: expect.stringMatching(/^usr_[0-9A-Za-z]{22}$/),
      tenant: tenant.id,
      email: "owner@example.com",
    });
    const row = await withDb((db) =>
      db
        .selectFrom("panel_users")
        .select("password_hash")
        .where("id", "=", user.id)
        .executeTakeFirstOrThrow(),
    );
    expect(row.password_hash).toStartWith("$argon2id$");
    expect(row.password_hash).not.toContain("a long enough password");

    const taken = await createUser(tenant.id, "owner@example.com", "another password");
    expect(taken.code).toBe(1);
    expect(JSON.parse(taken.stderr).error.message).toContain("exists already");
    const short = await createUser(tenant.id, "new@example.com", "short");
    expect(short.code).toBe(1);
    expect(JSON.parse(short.stderr).error.message).toContain("--password");
    const unknown = await createUser("ten_nope", "x@example.com", "long enough pw");
    expect(unknown.code).toBe(1);
  });
});

describe("migrations", () => {
  test("several processes migrating at once apply each file exactly once", async () => {
    const url = `postgres://postgres@127.0.0.1:5432/test_mig_${randomBase62(8).toLowerCase()}`;
    await Promise.all([ensureDatabase(url), ensureDatabase(url), ensureDatabase(url)]);
    const dbs = [createDb(url), createDb(url), createDb(url), createDb(url)];
    try {
      const results = await Promise.all(dbs.map((db) => migrate(db)));
      const applied = results.flat();
      expect(new Set(applied).size).toBe(applied.length);
      expect(applied).toContain("001_tenants_applications.sql");
    } finally {
      await Promise.all(dbs.map((db) => db.destroy()));
      await dropDatabase(url);
    }
  });
});
