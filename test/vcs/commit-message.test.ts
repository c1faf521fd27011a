import t from 'tap';
import { composeCommitMessage, parseCommitMessage } from '../../src/vcs/commit-message.js';
import type { CommitMessageParts } from '../../src/vcs/commit-message.js';

const bob = { name: 'Bob', email: 'bob@example.com' };
const noMail = { name: 'Agent Seven', email: null };

t.test('commit messages - description and managed trailers round-trip exactly', async (t) => {
  const descriptions = ['', 'fix', 'fix\n', 'fix\n\n', 'subject\n\nbody line\n', '\n', 'Fix: colon in subject', 'x\n\nSigned-off-by: A <a@x>\n'];
  const trailerSets: Array<Omit<CommitMessageParts, 'description'>> = [
    { coAuthors: [], aiProvider: null, aiModel: null },
    { coAuthors: [bob], aiProvider: null, aiModel: null },
    { coAuthors: [bob, noMail], aiProvider: 'claude', aiModel: 'claude-sonnet-4-5' },
    { coAuthors: [], aiProvider: 'codex', aiModel: null },
  ];
  for (const description of descriptions) {
    for (const trailers of trailerSets) {
      const parts = { description, ...trailers };
      const message = composeCommitMessage(parts);
      t.same(parseCommitMessage(message), parts, JSON.stringify(message));
    }
  }
});

t.test('commit messages - layout is git-style: blank line, one trailer per line', async (t) => {
  t.equal(composeCommitMessage({ description: 'fix\n', coAuthors: [bob, noMail], aiProvider: 'claude', aiModel: 'm' }), 'fix\n\nCo-authored-by: Bob <bob@example.com>\nCo-authored-by: Agent Seven\nAI-Provider: claude\nAI-Model: m\n');
  t.equal(composeCommitMessage({ description: '', coAuthors: [bob], aiProvider: null, aiModel: null }), 'Co-authored-by: Bob <bob@example.com>\n');
  t.equal(composeCommitMessage({ description: 'x', coAuthors: [], aiProvider: null, aiModel: null }), 'x');
});

t.test('commit messages - foreign messages keep other trailers in the description', async (t) => {
  t.same(parseCommitMessage('feat: x\n\nSigned-off-by: A <a@x>\nco-authored-by: Bob <bob@example.com>\nAI-Model: gpt\n'), {
    description: 'feat: x\n\nSigned-off-by: A <a@x>\n',
    coAuthors: [bob],
    aiProvider: null,
    aiModel: 'gpt',
  });
  t.same(parseCommitMessage('body\nCo-authored-by: Bob <bob@example.com>\n').coAuthors, [], 'not a trailer paragraph');
  t.same(parseCommitMessage('a\n\nCo-authored-by: Bob <>\n').coAuthors, [{ name: 'Bob', email: null }]);
});
