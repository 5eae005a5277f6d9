import type { TSchema } from "@sinclair/typebox";
import { type TypeCheck, TypeCompiler } from "@sinclair/typebox/compiler";
import { t } from "elysia";
import { ApiError } from "./errors.ts";

/**
 * TypeBox schemas validate; this file turns their failures into SPEC §7 envelopes with a dotted
 * `param` path and a sentence a person can act on.
 */

// TypeBox ValueErrorType numbers we treat specially (typebox/errors).
const REQUIRED_PROPERTY = 45;
const UNEXPECTED_PROPERTY = 42;
const STRING_PATTERN = 53;

/**
 * What a string whose `pattern` failed must be, in words (`"x-pattern-means"`: "printable ASCII
 * characters only"): the error names what failed, not the string's length the schema also bounds.
 */
export const PATTERN_MEANS_KEY = "x-pattern-means";

interface ValueErrorLike {
  type: number;
  path: string;
  message: string;
  schema: Record<string, unknown>;
  value?: unknown;
}

interface ValidationErrorLike {
  type: string;
  value: unknown;
  valueError?: ValueErrorLike;
  all: ValueErrorLike[];
}

/** A query integer that names itself, so errors from Elysia's per-property coercion keep their param. */
export function queryInteger(name: string, options: { minimum: number; maximum: number; default?: number }) {
  return t.Integer({ ...options, "x-param": name, description: `${options.minimum} to ${options.maximum}` });
}

/**
 * A schema may say in its own words what it expects (`"x-expected"`), where the words made from its
 * type would point the wrong way (an empty list is still "an array"; a nullable string is a union).
 */
export const EXPECTED_KEY = "x-expected";

function describeSchema(schema: Record<string, unknown>): string {
  if (typeof schema[EXPECTED_KEY] === "string") return schema[EXPECTED_KEY];
  const anyOf = schema.anyOf as Record<string, unknown>[] | undefined;
  if (anyOf) {
    const literals = anyOf.map((s) => s.const).filter((v) => v !== undefined);
    if (literals.length === anyOf.length)
      return `one of ${literals.map((v) => JSON.stringify(v)).join(", ")}`;
    const typed = anyOf.find((s) => s.type === "integer" || s.type === "number");
    if (typed) return describeSchema(typed);
    return "a value of another type";
  }
  if (schema.const !== undefined) return JSON.stringify(schema.const);
  const type = schema.type;
  if (type === "integer" || type === "number") {
    const noun = type === "integer" ? "an integer" : "a number";
    if (schema.minimum !== undefined && schema.maximum !== undefined) {
      return `${noun} from ${schema.minimum} to ${schema.maximum}`;
    }
    if (schema.minimum !== undefined) return `${noun} of at least ${schema.minimum}`;
    return noun;
  }
  if (type === "string") {
    const parts: string[] = ["a string"];
    if (schema.minLength !== undefined && schema.maxLength !== undefined) {
      parts.push(`of ${schema.minLength} to ${schema.maxLength} characters`);
    } else if (schema.maxLength !== undefined) parts.push(`of at most ${schema.maxLength} characters`);
    else if (schema.minLength) parts.push(`of at least ${schema.minLength} characters`);
    if (typeof schema.description === "string") parts.push(`(${schema.description})`);
    return parts.join(" ");
  }
  if (type === "object") return "an object";
  if (type === "array") return "an array";
  if (type === "boolean") return "a boolean";
  return "a valid value";
}

/** Names come from the request (an unknown key may be a megabyte long): echo a bounded part. */
const MAX_PARAM_LENGTH = 200;
function capped(name: string): string {
  return name.length > MAX_PARAM_LENGTH ? `${name.slice(0, MAX_PARAM_LENGTH)}…` : name;
}

function dotted(path: string): string {
  return path.replace(/^\//, "").replaceAll("/", ".");
}

export function validationToApiError(error: ValidationErrorLike): ApiError {
  const all = error.all.length > 0 ? error.all : error.valueError ? [error.valueError] : [];
  return valueErrorsToApiError(error.type, error.value, all);
}

/** At most this many of a value's errors are looked at: enough to pick the most useful one. */
const ERRORS_EXAMINED = 16;
const bodyCheckers = new WeakMap<TSchema, TypeCheck<TSchema>>();

/**
 * Checks a parsed body against its route's schema before the framework does. Elysia's own failure
 * serializes the whole offending value into its message (and walks it again for the error list), so
 * a large bad body would cost far more than a good one; here the check is the compiled schema's, and
 * only the first few errors are enumerated, lazily. Undefined when the body is valid.
 */
export function bodyValidationProblem(schema: TSchema, value: unknown): ApiError | undefined {
  let checker = bodyCheckers.get(schema);
  if (!checker) {
    checker = TypeCompiler.Compile(schema);
    bodyCheckers.set(schema, checker);
  }
  if (checker.Check(value)) return undefined;
  const errors: ValueErrorLike[] = [];
  for (const error of checker.Errors(value)) {
    errors.push(error as unknown as ValueErrorLike);
    if (errors.length >= ERRORS_EXAMINED) break;
  }
  return valueErrorsToApiError("body", value, errors);
}

function valueErrorsToApiError(where: string, value: unknown, all: ValueErrorLike[]): ApiError {
  if (where === "body" && (value === undefined || value === null || typeof value !== "object")) {
    return new ApiError(
      value === undefined || value === null ? "parameter_missing" : "parameter_invalid",
      "The request body must be a JSON object.",
    );
  }
  // The most useful error first: missing, then unknown, then the rest in schema order.
  const first =
    all.find((e) => e.type === REQUIRED_PROPERTY) ??
    all.find((e) => e.type === UNEXPECTED_PROPERTY) ??
    all[0];
  if (!first) return new ApiError("parameter_invalid", "The request is invalid.");
  const param = capped(dotted(first.path)) || (first.schema?.["x-param"] as string | undefined) || null;
  const named = param ?? where;
  if (first.type === REQUIRED_PROPERTY) {
    return new ApiError("parameter_missing", `Missing required parameter: ${named}.`, { param });
  }
  if (first.type === UNEXPECTED_PROPERTY) {
    return new ApiError("parameter_unknown", `Received unknown parameter: ${named}.`, { param });
  }
  const patternMeans = first.schema?.[PATTERN_MEANS_KEY];
  if (first.type === STRING_PATTERN && typeof patternMeans === "string") {
    return new ApiError("parameter_invalid", `Invalid ${named}: must be ${patternMeans}.`, { param });
  }
  return new ApiError(
    "parameter_invalid",
    `Invalid ${named}: expected ${describeSchema(first.schema ?? {})}.`,
    {
      param,
    },
  );
}
