import { InvalidArgumentError } from "../errors";

/** The page size rule of a list RPC. */
export interface PageSizeRule {
  /** What 0 (unset) means. */
  readonly default: number;
  /** Larger asks are clamped to this. */
  readonly max: number;
}

/** The usual rule: 0 → 50, at most 500. */
const DEFAULT_PAGE_SIZE: PageSizeRule = { default: 50, max: 500 };

/** A page size: 0 → the default, clamped at the max; negative or fractional is INVALID_ARGUMENT naming `field`. */
export function pageSize(field: string, value: number, rule: PageSizeRule = DEFAULT_PAGE_SIZE): number {
  if (!Number.isInteger(value)) throw new InvalidArgumentError(field, "must be a whole number");
  if (value < 0) throw new InvalidArgumentError(field, "must not be negative");
  if (value === 0) return rule.default;
  return Math.min(value, rule.max);
}
