/**
 * Sends a slow request and a quick one at once and says which was answered first: `quickFirst`
 * holds when the server answered the quick one while the slow one's work was under way, which it
 * cannot do while that work holds its thread.
 */
export async function answerOrder<S, Q>(slow: Promise<S>, quick: Promise<Q>): Promise<{ slow: S; quick: Q; quickFirst: boolean }> {
  const answered: string[] = [];
  const [s, q] = await Promise.all([slow.finally(() => answered.push('slow')), quick.finally(() => answered.push('quick'))]);
  return { slow: s, quick: q, quickFirst: answered[0] === 'quick' };
}
