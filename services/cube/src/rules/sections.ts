import { FailedPreconditionError } from "@unimatrix/service-kit/errors";

/** One edit of a role description's sections. */
export type SectionOp = "add" | "replace" | "remove";

const HEADING = /^##(?!#)\s*(.*?)\s*$/;

/** Applies one section edit to a Markdown description (level-2 headings delimit sections). */
export function patchSection(description: string, op: SectionOp, section: string, text: string): string {
  const lines = description === "" ? [] : description.split("\n");
  const start = lines.findIndex((line) => HEADING.exec(line)?.[1] === section);
  if (op === "add") {
    if (start >= 0) throw new FailedPreconditionError(`section "${section}" already exists`);
    const body = text.replace(/\n+$/, "");
    const head = description.replace(/\n+$/, "");
    return `${head === "" ? "" : `${head}\n\n`}## ${section}\n${body}${body === "" ? "" : "\n"}`;
  }
  if (start < 0) throw new FailedPreconditionError(`section "${section}" does not exist`);
  let end = lines.length;
  for (let i = start + 1; i < lines.length; i++) {
    if (HEADING.test(lines[i] as string)) {
      end = i;
      break;
    }
  }
  if (op === "remove") return [...lines.slice(0, start), ...lines.slice(end)].join("\n");
  const body = text.replace(/\n+$/, "");
  const replacement = body === "" ? [] : body.split("\n");
  const trailing = end < lines.length ? [""] : [];
  return [...lines.slice(0, start + 1), ...replacement, ...trailing, ...lines.slice(end)].join("\n");
}
