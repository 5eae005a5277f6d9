import { type AddressLookup, systemLookup } from "../../src/push/url-safety.ts";

/**
 * The resolver of the test apps (AppDeps.lookup): the names reserved for examples and tests
 * (RFC 2606, RFC 6761: example.com/.net/.org, *.example, *.test) resolve to this machine, where
 * nothing listens on their ports (a post to one fails at once); every other name goes to the system
 * resolver, so a `.invalid` name does not resolve. Tests use such names for webhook endpoints, and
 * an endpoint's host must resolve (DESIGN §12), with or without a network.
 */
export const testLookup: AddressLookup = (host) =>
  RESERVED_FOR_TESTS.test(host) ? Promise.resolve(["127.0.0.1"]) : systemLookup(host);

const RESERVED_FOR_TESTS = /(^|\.)(example\.(com|net|org)|example|test)\.?$/i;
