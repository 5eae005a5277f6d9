/**
 * A batch's column as ONE Postgres array literal (`{"a","b",NULL}`). Every query's array parameters
 * of scalars go this way (withArrayLiterals, applied to each connection by src/db/connect.ts), so a
 * caller passes a plain array (`${ids}::text[]`). It is what the pg driver sends for a JavaScript
 * array, made without its element-by-element escaping in JavaScript: `JSON.stringify` escapes `"`
 * and `\` the way a quoted array element does, natively. Postgres reads the literal as it reads
 * the driver's (measured on 100 rows of 27 columns: a third of json_to_recordset's cost there, and
 * the client's half of the driver's).
 *
 * Elements: strings, finite numbers, booleans, null or undefined (NULL). A Date goes as its ISO text.
 */
export type ArrayElement = string | number | boolean | null | undefined;

/** Any escape JSON makes but a quoted array element reads otherwise (`\n`, `\u0000`, ...). */
const JSON_ONLY_ESCAPE = /\\[^"\\]/;

export function arrayLiteral(values: readonly ArrayElement[]): string {
  const json = JSON.stringify(values);
  // JSON's `null` is an unquoted NULL to Postgres too; its strings are quoted elements.
  if (!JSON_ONLY_ESCAPE.test(json)) return `{${json.slice(1, -1)}}`;
  // Control characters, or a lone surrogate (written raw here: the driver's UTF-8 makes it U+FFFD,
  // as it did for arrays), or a backslash before one of them: quoted with only `"` and `\` escaped.
  return `{${values.map(element).join(",")}}`;
}

const isElement = (value: unknown): value is ArrayElement =>
  value === null ||
  value === undefined ||
  typeof value === "string" ||
  typeof value === "boolean" ||
  (typeof value === "number" && Number.isFinite(value));

/**
 * A query's parameters with each array of strings, finite numbers, booleans and nulls as its literal;
 * anything else (Dates, Buffers, nested arrays) is left to the driver, which writes it as before.
 */
export function withArrayLiterals(values: readonly unknown[]): readonly unknown[] {
  let converted: unknown[] | undefined;
  values.forEach((value, i) => {
    if (!Array.isArray(value) || !value.every(isElement)) return;
    converted ??= [...values];
    converted[i] = arrayLiteral(value);
  });
  return converted ?? values;
}

function element(value: ArrayElement): string {
  if (value === null || value === undefined) return "NULL";
  if (typeof value !== "string") return String(value);
  return `"${value.replaceAll(/["\\]/g, "\\$&")}"`;
}
