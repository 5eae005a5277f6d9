import { parsePhoneNumberFromString } from "libphonenumber-js/max";

/**
 * E.164 from what integrators or the provider give us ("+4915123456789", "4915123456789" as
 * WhatsApp's wa_id). Undefined when it is not a possible phone number.
 */
export function toE164(input: string): string | undefined {
  const trimmed = input.trim();
  if (!/^\+?[0-9 ()./-]{4,32}$/.test(trimmed)) return undefined;
  const withPlus = trimmed.startsWith("+") ? trimmed : `+${trimmed}`;
  const parsed = parsePhoneNumberFromString(withPlus);
  if (!parsed?.isPossible()) return undefined;
  return parsed.number;
}
