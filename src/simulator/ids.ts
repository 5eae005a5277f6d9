import { randomBytes, randomInt } from "node:crypto";

/** The ids the simulator makes up, in Graph's forms. */

export function newWamid(): string {
  return `wamid.${randomBytes(30).toString("base64url")}`;
}

/** Graph ids are decimal strings. */
export function newNumericId(): string {
  return String(randomInt(1, 10)) + Array.from({ length: 15 }, () => randomInt(0, 10)).join("");
}
