import { afterAll, beforeAll } from "bun:test";
import { createShop, type Shop } from "./fixtures.ts";
import { createTestEnv, type TestEnv, type TestEnvOptions } from "./index.ts";

type ShopOptions = NonNullable<Parameters<typeof createShop>[2]>;

export interface WorldOptions {
  /** The test env's options (e.g. `simulator: true`). */
  env?: TestEnvOptions;
  /** The shop's options (createShop: scopes, templates, ...); its tenant is named "Acme". */
  shop?: ShopOptions;
}

/** A file's test env with one shop (tenant, token, sender) and a second tenant's shop, "Other". */
export interface World {
  readonly env: TestEnv;
  readonly shop: Shop;
  /** Another tenant's shop: what it must not see of `shop`'s. */
  readonly other: Shop;
}

/**
 * The common preamble of a test file, at its top level: beforeAll creates the env and both shops,
 * afterAll closes the env. The fields are there from beforeAll on.
 */
export function useWorld(options: WorldOptions = {}): World {
  let made: World | undefined;
  beforeAll(async () => {
    const env = await createTestEnv(options.env);
    const shop = await createShop(env, "Acme", options.shop);
    made = { env, shop, other: await createShop(env, "Other") };
  });
  afterAll(() => made?.env.close());
  const ready = (): World => {
    if (!made) throw new Error("the world is made in beforeAll");
    return made;
  };
  return {
    get env() {
      return ready().env;
    },
    get shop() {
      return ready().shop;
    },
    get other() {
      return ready().other;
    },
  };
}
