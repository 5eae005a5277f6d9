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
