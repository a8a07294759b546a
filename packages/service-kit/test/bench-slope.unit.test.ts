// The soak's reductions (`npm run bench soak`): the slope per hour of a series sampled in
// milliseconds, and the floors of a sawtooth that a leak lifts and a collector's cycle does not.
import { floors, slopePerHour } from "../src/testing/bench";

const minutes = (m: number) => m * 60_000;

describe("slopePerHour", () => {
  test("is the rise per hour of a straight line, whatever its offset", () => {
    const points = [0, 10, 20, 30].map((m) => ({ x: minutes(m), y: 100 + m / 6 }));
    expect(slopePerHour(points)).toBeCloseTo(10, 9);
    expect(slopePerHour(points.map((p) => ({ ...p, y: 7 })))).toBe(0);
  });

  test("is the least-squares fit through noise, not the last minus the first", () => {
    const points = [
      { x: minutes(0), y: 0 },
      { x: minutes(20), y: 5 },
      { x: minutes(40), y: 1 },
      { x: minutes(60), y: 6 },
    ];
    // In hours: Σ(x-x̄)(y-ȳ) = 7/3 and Σ(x-x̄)² = 5/9, so 4.2/h (the last minus the first would say 6/h).
    expect(slopePerHour(points)).toBeCloseTo(4.2, 9);
  });

  test("is NaN without two distinct times", () => {
    expect(slopePerHour([])).toBeNaN();
    expect(slopePerHour([{ x: 5, y: 1 }])).toBeNaN();
    expect(
      slopePerHour([
        { x: 5, y: 1 },
        { x: 5, y: 2 },
      ]),
    ).toBeNaN();
  });
});

describe("floors", () => {
  test("a sawtooth on a flat floor has no slope through its floors, though it has one through its points", () => {
    // Rises 10 a sample, collected back to 50 every fourth sample; sampled mid-cycle at the end.
    const saw = Array.from({ length: 14 }, (_, i) => ({ x: minutes(i), y: 50 + (i % 4) * 10 }));
    expect(floors(saw, 4).map((p) => p.y)).toEqual([50, 50, 50, 50]);
    expect(slopePerHour(floors(saw, 4))).toBe(0);
    expect(Math.abs(slopePerHour(saw))).toBeGreaterThan(1);
  });

  test("a floor that rises (a leak) keeps its slope", () => {
    const leak = Array.from({ length: 16 }, (_, i) => ({ x: minutes(i), y: 50 + i + (i % 4) * 10 }));
    // Floors at minutes 0, 4, 8, 12 (50, 54, 58, 62), placed at their windows' mean times.
    expect(floors(leak, 4)).toEqual([
      { x: minutes(1.5), y: 50 },
      { x: minutes(5.5), y: 54 },
      { x: minutes(9.5), y: 58 },
      { x: minutes(13.5), y: 62 },
    ]);
    expect(slopePerHour(floors(leak, 4))).toBeCloseTo(60, 9);
  });
});
