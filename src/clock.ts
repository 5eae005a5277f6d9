/** Time as the service sees it; injected so tests can move it (token expiry, windows, quotas). */
export interface Clock {
  now(): Date;
}

export const systemClock: Clock = { now: () => new Date() };

export function epochSeconds(date: Date): number {
  return Math.floor(date.getTime() / 1000);
}

/** A clock tests can set and advance. */
export class ManualClock implements Clock {
  private current: number;
  constructor(start: Date = new Date()) {
    this.current = start.getTime();
  }
  now(): Date {
    return new Date(this.current);
  }
  advance(seconds: number): void {
    this.current += seconds * 1000;
  }
  set(date: Date): void {
    this.current = date.getTime();
  }
}

/** A day in milliseconds (retention and partition bounds are whole days). */
export const DAY_MS = 86_400_000;

/** The UTC day the daily quota counts (its key names the day YYYYMMDD); the panel shows the same. */
export function utcDay(date: Date): { key: string; start: Date; end: Date } {
  const start = new Date(Date.UTC(date.getUTCFullYear(), date.getUTCMonth(), date.getUTCDate()));
  return {
    key: start.toISOString().slice(0, 10).replaceAll("-", ""),
    start,
    end: new Date(start.getTime() + DAY_MS),
  };
}
