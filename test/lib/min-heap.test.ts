import { expect, test } from "bun:test";
import { MinHeap } from "../../src/lib/min-heap.ts";

test("MinHeap pops in key order, whatever the push order (interleaved pushes and pops too)", () => {
  for (let round = 0; round < 50; round++) {
    const heap = new MinHeap<{ seq: number }>((item) => item.seq);
    const reference: number[] = [];
    const popped: number[] = [];
    const expected: number[] = [];
    for (let i = 0; i < 200; i++) {
      const seq = Math.floor(Math.random() * 100);
      heap.push({ seq });
      reference.push(seq);
      if (Math.random() < 0.3) {
        reference.sort((a, b) => a - b);
        expected.push(reference.shift() as number);
        popped.push(heap.pop()?.seq as number);
      }
    }
    reference.sort((a, b) => a - b);
    expect(heap.size).toBe(reference.length);
    while (heap.size > 0) popped.push(heap.pop()?.seq as number);
    expect(popped).toEqual([...expected, ...reference]);
    expect(heap.pop()).toBeUndefined();
  }
});
