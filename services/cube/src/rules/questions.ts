/** Who replied: what decides whether a reply answers a question to the cube's humans. */
export interface ReplyAuthor {
  readonly principalKind: string;
  /** For a drone author: whether its role is a human seat. */
  readonly humanSeat: boolean;
}

/** A question is answered by the first reply from a user, or from a drone in a human-seat role. */
export function answersQuestion(author: ReplyAuthor): boolean {
  return author.principalKind === "user" || (author.principalKind === "drone-session" && author.humanSeat);
}
