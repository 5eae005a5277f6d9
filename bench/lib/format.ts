/** How the benches write their figures: timestamped lines, numbers, quantiles, table rows. */

/** A line of progress, prefixed with the time of day (HH:MM:SS). */
export function say(message: string): void {
  console.log(`${new Date().toISOString().slice(11, 19)} ${message}`);
}

/** A number with thousands separators and at most `digits` decimals; `-` when not finite. */
export const fmt = (n: number, digits = 0): string =>
  Number.isFinite(n) ? n.toLocaleString("en-US", { maximumFractionDigits: digits }) : "-";

/** Microseconds as milliseconds, two decimals. */
export const ms = (us: number): string => `${fmt(us / 1000, 2)} ms`;

/** The value at quantile `q` (0-1) of ascending `sorted`; NaN when empty. */
export function quantile(sorted: number[], q: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? Number.NaN;
}

/** A row of a fixed-width table: each cell right-aligned to its width, one space between cells. */
export function row(cells: [text: string | number, width: number][]): string {
  return cells.map(([text, width]) => String(text).padStart(width)).join(" ");
}
