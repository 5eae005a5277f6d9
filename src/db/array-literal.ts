/**
 * A batch's column as ONE Postgres array literal (`{"a","b",NULL}`), for a parameter cast to an
 * array type (`${arrayLiteral(ids)}::text[]`). It is what the pg driver sends for a JavaScript
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

function element(value: ArrayElement): string {
  if (value === null || value === undefined) return "NULL";
  if (typeof value !== "string") return String(value);
  return `"${value.replaceAll(/["\\]/g, "\\$&")}"`;
}
