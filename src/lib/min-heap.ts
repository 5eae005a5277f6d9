/** A binary min-heap by a numeric key: push and pop in O(log n) (a sorted array re-sorted per pop is O(n log n)). */
export class MinHeap<T> {
  private readonly items: T[] = [];

  constructor(private readonly keyOf: (item: T) => number) {}

  get size(): number {
    return this.items.length;
  }

  push(item: T): void {
    const items = this.items;
    items.push(item);
    let at = items.length - 1;
    while (at > 0) {
      const parent = (at - 1) >> 1;
      if (this.keyOf(items[parent] as T) <= this.keyOf(item)) break;
      items[at] = items[parent] as T;
      at = parent;
    }
    items[at] = item;
  }

  pop(): T | undefined {
    const items = this.items;
    const top = items[0];
    const last = items.pop();
    if (items.length === 0 || last === undefined) return top;
    let at = 0;
    const key = this.keyOf(last);
    for (;;) {
      const left = 2 * at + 1;
      if (left >= items.length) break;
      const right = left + 1;
      const child =
        right < items.length && this.keyOf(items[right] as T) < this.keyOf(items[left] as T) ? right : left;
      if (this.keyOf(items[child] as T) >= key) break;
      items[at] = items[child] as T;
      at = child;
    }
    items[at] = last;
    return top;
  }
}
