-- Provider notices (a changed number, a reaction, a type we do not model) are stored as messages of
-- type system_<kind> but are not conversation: history, the panel's thread and the feed leave them
-- out. This is that test, defined once for SQL (src/channel/system-messages.ts is its TypeScript
-- twin). A one-expression LANGUAGE sql function, neither STRICT nor volatile, is inlined by the
-- planner: `NOT is_system_message(type)` plans as `type !~~ 'system\_%'`, as the LIKE it replaces.
-- The pattern is written with ESCAPE '!' so that it reads the same whatever
-- standard_conforming_strings says when the body is parsed.
CREATE FUNCTION is_system_message(message_type text) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT message_type LIKE 'system!_%' ESCAPE '!'
$$;
