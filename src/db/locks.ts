/**
 * Postgres advisory lock keys, one place for all of them: two jobs sharing a key would stall each
 * other (a template sync holding a key for seconds must not stop the feed sequencer).
 */
export const ADVISORY_LOCKS = {
  migrations: 727_001,
  templateSync: 727_002,
  feedSequencer: 727_003,
  /** With a hash of a tenant's phone or user id: one resolution of that identity at a time (src/contacts/identity.ts). */
  contactIdentity: 727_004,
} as const;
