import { notificationText, PING_TEXT, PREVIEW_CHARS, preview } from "../src/rules/preview";

describe("notification preview", () => {
  test("folds every whitespace run (spaces, tabs, newlines, unicode spaces) to one space", () => {
    expect(preview("a  b\t\tc\n\nd \r\n e\u00a0\u2003f")).toBe("a b c d e f");
  });

  test("trims both ends", () => {
    expect(preview("  \n hello world \t\n")).toBe("hello world");
    expect(preview(" \n\t ")).toBe("");
  });

  test("cuts at 200 characters, counted in code points, after folding", () => {
    expect(PREVIEW_CHARS).toBe(200);
    expect(preview("x".repeat(199))).toBe("x".repeat(199));
    expect(preview("x".repeat(200))).toBe("x".repeat(200));
    expect(preview("x".repeat(201))).toBe("x".repeat(200));
    // Folding happens first: 150 words "ab" separated by runs of spaces fold to 449 characters.
    expect(preview(Array(150).fill("ab").join("     "))).toBe(Array(150).fill("ab").join(" ").slice(0, 200));
    // Astral characters count once and are never split into a lone surrogate.
    const emoji = "😀".repeat(250);
    const cut = preview(emoji);
    expect(Array.from(cut)).toHaveLength(200);
    expect(cut).toBe("😀".repeat(200));
  });

  test("a cut never leaves a trailing space (trimmed again after the cut)", () => {
    expect(preview(`${"y".repeat(199)}  z`)).toBe("y".repeat(199));
    expect(notificationText("ack", `${"y".repeat(199)} z`)).toBe(`[ACK] ${"y".repeat(199)}`);
  });
});

describe("notification text", () => {
  test("[ACK], [CLAIM] and [RELEASE] followed by the preview", () => {
    expect(notificationText("ack", "  please\nreview   the plan ")).toBe("[ACK] please review the plan");
    expect(notificationText("claim", "task one")).toBe("[CLAIM] task one");
    expect(notificationText("release", "task one")).toBe("[RELEASE] task one");
  });

  test("the preview inside the text is the cut one", () => {
    const text = notificationText("claim", "z".repeat(500));
    expect(text).toBe(`[CLAIM] ${"z".repeat(200)}`);
  });

  test("the liveness ping text", () => {
    expect(PING_TEXT).toBe("[PING] are you still there? post to the log to stay live");
  });
});
