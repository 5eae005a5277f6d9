import { createHash } from "node:crypto";
import { getCountries, getCountryCallingCode, parsePhoneNumberFromString } from "libphonenumber-js/max";
import type { WireUser } from "../channel/webhook-payloads.ts";
import { ControlError } from "./errors.ts";
import type { SimUser, SimulatorState } from "./state.ts";

/**
 * The WhatsApp users the simulator has met (DESIGN §14): each has a BSUID, derived stably from the
 * phone when the simulator first meets the user by phone, or given by a control call; a phone, unless
 * only the BSUID is known; and may withhold the phone (then no webhook carries it) or have a
 * username. Remembered across calls (a user who hides the phone keeps hiding it), the oldest
 * forgotten past `keepSends` like the sends: a forgotten user is met again as new. (The records
 * are in state.ts, with the rest of the simulator's memory.)
 */

/** Country code used when a phone's calling code names none (ISO 3166's "unknown" code). */
const UNKNOWN_COUNTRY = "ZZ";

/** The ISO country of a phone (digits): from the number, else the first country of its calling code. */
function countryOf(digits: string): string {
  const parsed = parsePhoneNumberFromString(`+${digits}`);
  if (parsed?.country) return parsed.country;
  const possible = parsed?.getPossibleCountries()[0];
  if (possible) return possible;
  const callingCode = parsed?.countryCallingCode;
  return getCountries().find((country) => getCountryCallingCode(country) === callingCode) ?? UNKNOWN_COUNTRY;
}

/**
 * The BSUID the simulator gives a phone (digits): `<country>.` and 16 digits of a hash, stable across
 * runs. `owner` counts the people who had the number before (a number that changed hands names
 * someone else, with a BSUID of their own).
 */
export function bsuidForPhone(digits: string, owner = 0): string {
  const hash = createHash("sha256")
    .update(owner === 0 ? `bsuid:${digits}` : `bsuid:${digits}:${owner}`)
    .digest();
  const number = hash.readBigUInt64BE(0) % 10n ** 16n;
  return `${countryOf(digits)}.${number.toString().padStart(16, "0")}`;
}

/**
 * The user with this phone (digits): the one remembered, else a new one with the derived BSUID (or,
 * when a user the simulator remembers holds that BSUID, having moved to another number, the next one).
 */
export function userByPhone(state: SimulatorState, digits: string): SimUser {
  return (
    state.users.byPhone.get(digits) ?? {
      phone: digits,
      userId: newUserIdFor(state, digits),
      username: null,
      hidePhone: false,
    }
  );
}

/**
 * The BSUID of a user first met by `digits`: the one derived from the number, unless a remembered
 * user who moved to another number holds it (the number changed hands: its new owner is someone
 * else). A holder whose phone the simulator never learned is the number's owner, met by BSUID first.
 */
function newUserIdFor(state: SimulatorState, digits: string): string {
  for (let owner = 0; ; owner++) {
    const userId = bsuidForPhone(digits, owner);
    const holder = state.users.byUserId.get(userId);
    if (!holder || holder.phone === null || holder.phone === digits) return userId;
  }
}

/** The user with this BSUID: the one remembered, else one the simulator knows by the BSUID only. */
export function userByUserId(state: SimulatorState, userId: string): SimUser {
  return state.users.byUserId.get(userId) ?? { phone: null, userId, username: null, hidePhone: false };
}

/** Remembers `user` (again): by BSUID, and by phone when it has one. */
export function rememberUser(state: SimulatorState, user: SimUser): void {
  state.users.byUserId.set(user.userId, user);
  if (user.phone !== null) {
    const previous = state.users.byPhone.get(user.phone);
    // A phone names one user: whoever had it before no longer does.
    if (previous && previous !== user) previous.phone = null;
    state.users.byPhone.set(user.phone, user);
  }
}

/** How a webhook names `user`, with the profile name it gives. */
export function wireUserOf(user: SimUser, name?: string): WireUser {
  return {
    phone: user.phone,
    phoneShared: !user.hidePhone,
    userId: user.userId,
    username: user.username,
    name: name ?? null,
  };
}

/**
 * The author of a POST /_sim/inbound: found by `user_id` or `from`, created when new, and given the
 * call's `username` and `hide_phone`. A phone and a BSUID that name two different users are refused.
 */
export function inboundAuthor(
  state: SimulatorState,
  request: { from?: string; user_id?: string; username?: string; hide_phone?: boolean },
): SimUser {
  const phone = request.from?.replace(/^\+/, "") ?? null;
  if (phone === null && request.user_id === undefined) throw new ControlError("give from, user_id or both");
  const byId = request.user_id === undefined ? undefined : state.users.byUserId.get(request.user_id);
  const byPhone = phone === null ? undefined : state.users.byPhone.get(phone);
  // The phone is another user's, whether the BSUID names a remembered user or a new one.
  if (byPhone && request.user_id !== undefined && byPhone.userId !== request.user_id) {
    throw new ControlError(`from +${phone} is the user ${byPhone.userId}, not ${request.user_id}`);
  }
  const known = byId ?? byPhone;
  if (known?.phone && phone !== null && known.phone !== phone) {
    throw new ControlError(
      `user_id ${known.userId} has the phone +${known.phone}: change it with POST /_sim/users/change_number`,
    );
  }
  const user = known ?? {
    phone,
    userId: request.user_id ?? newUserIdFor(state, phone!),
    username: null,
    hidePhone: false,
  };
  if (phone !== null) user.phone = phone;
  if (request.username !== undefined) user.username = request.username === "" ? null : request.username;
  if (request.hide_phone !== undefined) user.hidePhone = request.hide_phone;
  rememberUser(state, user);
  return user;
}

/** POST /_sim/users/change_number: the user's phone is `newPhone` (digits) from now on. */
export function changeNumber(state: SimulatorState, user: SimUser, newPhone: string): void {
  if (user.phone !== null && state.users.byPhone.get(user.phone) === user)
    state.users.byPhone.delete(user.phone);
  user.phone = newPhone;
  rememberUser(state, user);
}

/** POST /_sim/users/change_user_id: the user's BSUID is `newUserId` from now on. */
export function changeUserId(state: SimulatorState, user: SimUser, newUserId: string): void {
  const holder = state.users.byUserId.get(newUserId);
  if (holder && holder !== user) throw new ControlError(`new_user_id ${newUserId} is another user's`);
  if (state.users.byUserId.get(user.userId) === user) state.users.byUserId.delete(user.userId);
  user.userId = newUserId;
  rememberUser(state, user);
}

/** Past `keep` users, the oldest tenth is forgotten at once (as sends are). */
export function forgetOldUsers(state: SimulatorState, keep: number): void {
  const { byUserId, byPhone } = state.users;
  const slack = Math.max(1, Math.floor(keep / 10));
  if (byUserId.size <= keep + slack) return;
  let drop = byUserId.size - keep;
  for (const [userId, user] of byUserId) {
    if (drop-- <= 0) break;
    byUserId.delete(userId);
    if (user.phone !== null && byPhone.get(user.phone) === user) byPhone.delete(user.phone);
  }
}
