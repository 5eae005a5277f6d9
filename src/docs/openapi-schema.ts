/**
 * TypeBox schemas (the ones that validate requests and responses) as OpenAPI 3.1 JSON Schema, for the
 * document src/docs/openapi.ts builds. Schemas with a `title` become components
 * (`#/components/schemas/<title>`); Elysia's coercing number types, `nullable` flags and
 * union-of-literal encodings are rewritten as plain JSON Schema 2020-12 (OpenAPI 3.1).
 */

import { EXPECTED_KEY, PATTERN_MEANS_KEY } from "../http/validation.ts";

export type Json = Record<string, unknown>;

export const isObject = (value: unknown): value is Json =>
  typeof value === "object" && value !== null && !Array.isArray(value);

/** Child keys of a JSON Schema that hold schemas (not data such as `examples`, `default`, `const`). */
const SCHEMA_MAPS = ["properties", "patternProperties", "$defs", "dependentSchemas"];
const SCHEMA_LISTS = ["anyOf", "oneOf", "allOf", "prefixItems"];
const SCHEMA_VALUES = ["items", "additionalProperties", "not", "contains", "propertyNames"];
/** The string half of Elysia's coercing types (t.Integer, t.Numeric, t.BooleanString). */
const COERCING_FORMATS = new Set(["integer", "numeric", "number", "boolean"]);

/** `#/components/schemas`, filled as titled schemas are met. */
export class Components {
  private readonly schemas = new Map<string, Json>();

  /** A TypeBox schema as OpenAPI 3.1 JSON Schema; a titled one becomes a `$ref`. */
  toJson(schema: unknown): Json {
    // JSON drops TypeBox's symbol-keyed metadata (Kind, Optional, transforms).
    return this.normalize(JSON.parse(JSON.stringify(schema ?? {}))) as Json;
  }

  /** Like toJson, but the outer schema stays inline (parameter lists are read from it). */
  inline(schema: unknown): Json {
    const json = JSON.parse(JSON.stringify(schema ?? {})) as Json;
    const { title: _title, ...rest } = json;
    return this.normalize(rest) as Json;
  }

  add(schema: unknown): void {
    this.toJson(schema);
  }

  describe(schema: unknown): string | undefined {
    return isObject(schema) && typeof schema.description === "string" ? schema.description : undefined;
  }

  sorted(): Record<string, Json> {
    return Object.fromEntries([...this.schemas].sort(([a], [b]) => a.localeCompare(b)));
  }

  private normalize(value: unknown): unknown {
    if (!isObject(value)) return value;
    let node: Json = { ...value };
    if (Array.isArray(node.anyOf)) {
      let members = node.anyOf as Json[];
      const coercing = members.filter(
        (m) => m.type === "string" && typeof m.format === "string" && COERCING_FORMATS.has(m.format),
      );
      if (coercing.length > 0 && coercing.length < members.length) {
        members = members.filter((m) => !coercing.includes(m));
      }
      const { anyOf: _anyOf, ...rest } = node;
      if (members.length > 0 && members.every((m) => typeof m.const === "string")) {
        node = { ...rest, type: "string", enum: members.map((m) => m.const) };
      } else if (members.length === 1) {
        node = { ...rest, ...members[0] };
      } else {
        node = { ...rest, anyOf: members };
      }
    }

    // OpenAPI 3.0's flag (3.1 says null with `type`), Elysia's validation hints, t.File's default.
    delete node.nullable;
    delete node["x-param"];
    delete node[EXPECTED_KEY];
    delete node[PATTERN_MEANS_KEY];
    delete node.elysiaMeta;
    // A file (t.File's `format: binary`) is, in OpenAPI 3.1, a string of some media type; the
    // request's `encoding` names the types taken.
    if (node.format === "binary") {
      const { format: _format, default: _default, ...rest } = node;
      node = { ...rest, contentMediaType: "application/octet-stream" };
    }

    // t.Record(t.String(), X): any property name.
    const patterns = node.patternProperties;
    if (
      isObject(patterns) &&
      Object.keys(patterns).length === 1 &&
      "^(.*)$" in patterns &&
      !node.properties
    ) {
      const { patternProperties: _p, ...rest } = node;
      node = { ...rest, additionalProperties: patterns["^(.*)$"] };
    }

    for (const key of SCHEMA_MAPS) {
      const map = node[key];
      if (isObject(map)) {
        node[key] = Object.fromEntries(Object.entries(map).map(([name, s]) => [name, this.normalize(s)]));
      }
    }
    for (const key of SCHEMA_LISTS) {
      const list = node[key];
      if (Array.isArray(list)) node[key] = list.map((s) => this.normalize(s));
    }
    for (const key of SCHEMA_VALUES) {
      if (isObject(node[key])) node[key] = this.normalize(node[key]);
    }

    // [X, null] with a plain X reads better as `type: [X, "null"]`.
    if (Array.isArray(node.anyOf) && node.anyOf.length === 2) {
      const members = node.anyOf as Json[];
      const other = members.find((m) => m.type !== "null");
      if (
        other &&
        members.some((m) => m.type === "null" && Object.keys(m).length === 1) &&
        typeof other.type === "string" &&
        other.$ref === undefined
      ) {
        const { anyOf: _anyOf, ...rest } = node;
        node = { ...rest, ...other, type: [other.type, "null"] };
      }
    }

    if (typeof node.title === "string") return this.register(node.title, node);
    return node;
  }

  private register(name: string, schema: Json): Json {
    const known = this.schemas.get(name);
    if (known && JSON.stringify(known) !== JSON.stringify(schema)) {
      throw new Error(`two different schemas are titled ${name}`);
    }
    this.schemas.set(name, schema);
    return { $ref: `#/components/schemas/${name}` };
  }
}
