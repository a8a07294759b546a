/** Where a task stands, as one kind of task reports it (the registry adds the task's handle fields). */
export interface TaskState {
  readonly status: "working" | "completed";
  /** When it last changed (epoch ms). */
  readonly at: number;
  readonly message: string;
  /** The tool result, once completed. */
  readonly result?: Record<string, unknown>;
}
