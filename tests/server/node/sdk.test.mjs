// strata's OpenAI-compatible server driven by the official OpenAI Node SDK (pinned in
// package-lock.json; `npm ci` here first). The demo model behind `strata serve` answers the
// completions / chat / streaming / stop / logprobs / n / error cases; the scripted-engine
// fixture (strata_server_fixture) produces reasoning and tool calls through the real Nemotron-3
// template and parsers, and checks the API key. Run by ctest as server_node_sdk, with
// STRATA_BINARY, STRATA_FIXTURE and STRATA_SOURCE_DIR set.
import { test, before, after, describe } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import path from 'node:path';
import OpenAI from 'openai';

const STRATA = process.env.STRATA_BINARY;
const FIXTURE = process.env.STRATA_FIXTURE;
const SRC = process.env.STRATA_SOURCE_DIR;
if (!STRATA || !FIXTURE || !SRC) throw new Error('set STRATA_BINARY, STRATA_FIXTURE and STRATA_SOURCE_DIR');
const DEMO = path.join(SRC, 'models/demo');
const NANO3_TEMPLATE = path.join(SRC, 'tests/fixtures/chat/templates/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16.jinja');

// Starts a server process and resolves with its base URL once it prints "listening on URL".
function startServer(bin, args) {
  return new Promise((resolve, reject) => {
    const child = spawn(bin, args, { stdio: ['ignore', 'ignore', 'pipe'] });
    let log = '';
    const timer = setTimeout(() => reject(new Error(`${bin} did not start:\n${log}`)), 120000);
    child.stderr.on('data', (d) => {
      log += d.toString();
      const m = log.match(/listening on (http:\/\/[0-9.]+:\d+)/);
      if (m) {
        clearTimeout(timer);
        resolve({ child, url: m[1], log: () => log });
      }
    });
    child.on('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`${bin} exited with ${code}:\n${log}`));
    });
  });
}

async function stop(server) {
  if (!server) return;
  const exited = new Promise((r) => server.child.once('exit', (code, sig) => r({ code, sig })));
  server.child.kill('SIGTERM');
  const { code } = await exited;
  assert.equal(code, 0, `server did not exit cleanly on SIGTERM:\n${server.log()}`);
}

const client = (url, apiKey = 'unused') =>
  new OpenAI({ baseURL: `${url}/v1`, apiKey, maxRetries: 0, timeout: 120000 });

async function collectCompletionStream(stream) {
  let text = '';
  let usage = null;
  let finish = null;
  for await (const chunk of stream) {
    if (chunk.usage) usage = chunk.usage;
    if (chunk.choices.length === 0) continue;
    text += chunk.choices[0].text;
    if (chunk.choices[0].finish_reason) finish = chunk.choices[0].finish_reason;
  }
  return { text, usage, finish };
}

describe('strata serve with the demo model', () => {
  let server;
  let ai;
  before(async () => {
    server = await startServer(STRATA, ['serve', DEMO, '--port', '0', '--served-model-name', 'demo',
                                        '--max-model-len', '512', '--max-num-seqs', '8']);
    ai = client(server.url);
  });
  after(async () => stop(server));

  test('models lists the served name with root and max_model_len', async () => {
    const models = await ai.models.list();
    assert.equal(models.data[0].id, 'demo');
    assert.equal(models.data[0].root, DEMO);
    assert.equal(models.data[0].max_model_len, 512);
  });

  test('completion: text, usage, greedy determinism, stream equal to non-stream', async () => {
    const req = { model: 'demo', prompt: 'A fool and his money', max_tokens: 12, temperature: 0 };
    const a = await ai.completions.create(req);
    const b = await ai.completions.create(req);
    assert.equal(a.object, 'text_completion');
    assert.equal(a.choices[0].text, b.choices[0].text);
    assert.ok(['length', 'stop'].includes(a.choices[0].finish_reason));
    assert.ok(a.usage.prompt_tokens > 0);
    assert.ok(a.usage.completion_tokens > 0 && a.usage.completion_tokens <= 12);
    assert.equal(a.usage.total_tokens, a.usage.prompt_tokens + a.usage.completion_tokens);
    const s = await collectCompletionStream(await ai.completions.create(
      { ...req, stream: true, stream_options: { include_usage: true } }));
    assert.equal(s.text, a.choices[0].text);
    assert.equal(s.finish, a.choices[0].finish_reason);
    assert.deepEqual(s.usage, a.usage);
  });

  test('chat: answer, streamed deltas equal to the answer, usage chunk', async () => {
    const req = { model: 'demo', messages: [{ role: 'user', content: 'Tell me a fortune.' }],
                  max_tokens: 16, temperature: 0 };
    const a = await ai.chat.completions.create(req);
    assert.equal(a.object, 'chat.completion');
    assert.equal(a.choices[0].message.role, 'assistant');
    let content = '';
    let usage = null;
    let first = true;
    for await (const chunk of await ai.chat.completions.create(
      { ...req, stream: true, stream_options: { include_usage: true } })) {
      if (chunk.usage) usage = chunk.usage;
      if (chunk.choices.length === 0) continue;
      if (first) assert.equal(chunk.choices[0].delta.role, 'assistant');
      first = false;
      content += chunk.choices[0].delta.content ?? '';
    }
    assert.equal(content, a.choices[0].message.content);
    assert.deepEqual(usage, a.usage);
  });

  test('stop strings cut the text before the stop and finish with stop', async () => {
    const base = { model: 'demo', prompt: 'Life is', max_tokens: 24, temperature: 0, ignore_eos: true };
    const full = (await ai.completions.create(base)).choices[0].text;
    // A stop string taken from the middle of the greedy text.
    let at = -1;
    for (let i = 3; i + 3 <= full.length; ++i)
      if (full.slice(i, i + 3).trim().length === 3) { at = i; break; }
    assert.ok(at > 0, `no usable stop string in ${JSON.stringify(full)}`);
    const stopStr = full.slice(at, at + 3);
    const cut = full.indexOf(stopStr);
    const r = await ai.completions.create({ ...base, stop: [stopStr] });
    assert.equal(r.choices[0].text, full.slice(0, cut));
    assert.equal(r.choices[0].finish_reason, 'stop');
    assert.equal(r.choices[0].stop_reason, stopStr);
  });

  test('completion logprobs: one entry per token, k alternatives, the greedy token on top', async () => {
    const r = await ai.completions.create(
      { model: 'demo', prompt: 'Never', max_tokens: 6, temperature: 0, logprobs: 2, ignore_eos: true });
    const lp = r.choices[0].logprobs;
    assert.equal(lp.tokens.length, r.usage.completion_tokens);
    assert.equal(lp.token_logprobs.length, lp.tokens.length);
    assert.equal(lp.top_logprobs.length, lp.tokens.length);
    for (let i = 0; i < lp.tokens.length; ++i) {
      assert.ok(lp.token_logprobs[i] <= 0);
      const alts = Object.entries(lp.top_logprobs[i]);
      assert.ok(alts.length >= 1 && alts.length <= 2);
      const best = Math.max(...alts.map(([, v]) => v));
      assert.ok(Math.abs(best - lp.token_logprobs[i]) < 1e-5, 'greedy picks the most likely token');
    }
  });

  test('chat logprobs: content entries with top_logprobs in OpenAI shape', async () => {
    const r = await ai.chat.completions.create({
      model: 'demo', messages: [{ role: 'user', content: 'Hi' }], max_tokens: 5, temperature: 0,
      logprobs: true, top_logprobs: 3, ignore_eos: true });
    const content = r.choices[0].logprobs.content;
    assert.equal(content.length, r.usage.completion_tokens);
    for (const e of content) {
      assert.equal(typeof e.token, 'string');
      assert.ok(Array.isArray(e.bytes));
      assert.equal(e.top_logprobs.length, 3);
      assert.equal(e.top_logprobs[0].token, e.token);
      assert.ok(Math.abs(e.top_logprobs[0].logprob - e.logprob) < 1e-5);
      for (let k = 1; k < 3; ++k) assert.ok(e.top_logprobs[k].logprob <= e.top_logprobs[k - 1].logprob);
    }
  });

  test('n > 1: one choice per index, usage counts them all', async () => {
    const r = await ai.completions.create(
      { model: 'demo', prompt: 'The', max_tokens: 8, n: 3, temperature: 0.9, seed: 5, ignore_eos: true });
    assert.deepEqual(r.choices.map((c) => c.index).sort(), [0, 1, 2]);
    assert.equal(r.usage.completion_tokens, 24);
  });

  test('bad requests surface as the SDK typed errors', async () => {
    const ok = { model: 'demo', prompt: 'x', max_tokens: 2 };
    await assert.rejects(ai.completions.create({ ...ok, temperature: -1 }),
      (e) => e instanceof OpenAI.BadRequestError && e.status === 400);
    await assert.rejects(ai.completions.create({ ...ok, model: 'nope' }),
      (e) => e instanceof OpenAI.NotFoundError && e.status === 404);
    await assert.rejects(ai.completions.create({ ...ok, max_tokens: 1e9 }),
      (e) => e instanceof OpenAI.BadRequestError);
    await assert.rejects(ai.chat.completions.create({ model: 'demo', messages: [] }),
      (e) => e instanceof OpenAI.BadRequestError);
    await assert.rejects(ai.completions.create({ ...ok, n: 0 }),
      (e) => e instanceof OpenAI.BadRequestError);
    await assert.rejects(ai.completions.create({ ...ok, top_p: 1.5 }),
      (e) => e instanceof OpenAI.BadRequestError && /top_p/.test(e.message));
    // Still answering.
    const r = await ai.completions.create(ok);
    assert.ok(r.choices.length === 1);
  });

  test('a stream the client aborts is aborted on the server', async () => {
    const controller = new AbortController();
    const stream = await ai.completions.create(
      { model: 'demo', prompt: 'Once', max_tokens: 400, ignore_eos: true, stream: true },
      { signal: controller.signal });
    let chunks = 0;
    try {
      for await (const chunk of stream) {
        if (++chunks === 3) {
          controller.abort();
          break;  // leaving the loop also ends the SDK's stream
        }
      }
    } catch (e) {
      assert.ok(e instanceof OpenAI.APIUserAbortError, `unexpected ${e}`);
    }
    assert.equal(chunks, 3);
    // The engine lets go of it: nothing running, nothing waiting.
    let running = -1;
    for (let i = 0; i < 100 && running !== 0; ++i) {
      const text = await (await fetch(`${server.url}/metrics`)).text();
      running = Number(text.match(/^vllm:num_requests_running\{[^}]*\} (\S+)$/m)[1]) +
                Number(text.match(/^vllm:num_requests_waiting\{[^}]*\} (\S+)$/m)[1]);
      if (running !== 0) await new Promise((r) => setTimeout(r, 50));
    }
    assert.equal(running, 0);
  });
});

describe('reasoning and tool calls (scripted engine, Nemotron-3 template and parsers)', () => {
  const TOOL_SCRIPT = 'Let me think.</think><tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call>';
  const tools = [{ type: 'function', function: { name: 'get_weather', description: 'Weather of a city',
    parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } } }];
  let toolServer;
  let reasonServer;
  before(async () => {
    const common = ['--chat-template', NANO3_TEMPLATE, '--reasoning-parser', 'nano_v3',
                    '--tool-call-parser', 'qwen3_coder', '--enable-auto-tool-choice'];
    toolServer = await startServer(FIXTURE, ['--script', TOOL_SCRIPT, ...common]);
    reasonServer = await startServer(FIXTURE, ['--script', 'Two plus two is four.</think>The answer is 4.', ...common]);
  });
  after(async () => {
    await stop(toolServer);
    await stop(reasonServer);
  });

  test('tool call parsed into tool_calls with the reasoning split off', async () => {
    const r = await client(toolServer.url).chat.completions.create({
      model: 'demo', messages: [{ role: 'user', content: 'Weather in Paris?' }], tools, max_tokens: 200 });
    const m = r.choices[0].message;
    assert.equal(r.choices[0].finish_reason, 'tool_calls');
    assert.equal(m.tool_calls.length, 1);
    assert.equal(m.tool_calls[0].type, 'function');
    assert.equal(m.tool_calls[0].function.name, 'get_weather');
    assert.deepEqual(JSON.parse(m.tool_calls[0].function.arguments), { city: 'Paris' });
    assert.equal(m.reasoning, 'Let me think.');
    assert.equal(m.reasoning_content, 'Let me think.');
  });

  test('streamed tool call deltas accumulate to the same call', async () => {
    const stream = await client(toolServer.url).chat.completions.create({
      model: 'demo', messages: [{ role: 'user', content: 'Weather in Paris?' }], tools, max_tokens: 200,
      stream: true });
    let name = '';
    let args = '';
    let reasoning = '';
    let finish = null;
    for await (const chunk of stream) {
      const c = chunk.choices[0];
      if (!c) continue;
      reasoning += c.delta.reasoning ?? '';
      for (const call of c.delta.tool_calls ?? []) {
        name += call.function?.name ?? '';
        args += call.function?.arguments ?? '';
      }
      if (c.finish_reason) finish = c.finish_reason;
    }
    assert.equal(name, 'get_weather');
    assert.deepEqual(JSON.parse(args), { city: 'Paris' });
    assert.equal(reasoning, 'Let me think.');
    assert.equal(finish, 'tool_calls');
  });

  test('reasoning and content, whole and streamed', async () => {
    const ai = client(reasonServer.url);
    const req = { model: 'demo', messages: [{ role: 'user', content: '2+2?' }], max_tokens: 100 };
    const r = await ai.chat.completions.create(req);
    assert.equal(r.choices[0].message.content, 'The answer is 4.');
    assert.equal(r.choices[0].message.reasoning, 'Two plus two is four.');
    let content = '';
    let reasoning = '';
    for await (const chunk of await ai.chat.completions.create({ ...req, stream: true })) {
      if (!chunk.choices[0]) continue;
      content += chunk.choices[0].delta.content ?? '';
      reasoning += chunk.choices[0].delta.reasoning ?? '';
    }
    assert.equal(content, 'The answer is 4.');
    assert.equal(reasoning, 'Two plus two is four.');
  });
});

describe('tool_choice required and named (scripted engine writing the guided JSON)', () => {
  const tools = [{ type: 'function', function: { name: 'get_weather', description: 'Weather of a city',
    parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } } }];
  let server;
  before(async () => {
    server = await startServer(FIXTURE, ['--script', '[{"name": "get_weather", "parameters": {"city": "Paris"}}]',
                                         '--chat-template', NANO3_TEMPLATE]);
  });
  after(async () => stop(server));

  for (const [choice, finishWanted] of [['required', 'tool_calls'],
                                        [{ type: 'function', function: { name: 'get_weather' } }, 'stop']]) {
    const label = typeof choice === 'string' ? choice : 'named';
    test(`${label}: tool_calls whole and streamed (finish ${finishWanted})`, async () => {
      const ai = client(server.url);
      const req = { model: 'demo', messages: [{ role: 'user', content: 'Weather in Paris?' }], tools,
                    tool_choice: choice, max_tokens: 200 };
      const r = await ai.chat.completions.create(req);
      const m = r.choices[0].message;
      assert.equal(r.choices[0].finish_reason, finishWanted);
      assert.equal(m.tool_calls.length, 1);
      assert.equal(m.tool_calls[0].function.name, 'get_weather');
      const args = JSON.parse(m.tool_calls[0].function.arguments);
      // Named: the whole output is the arguments (the scripted engine writes the required form).
      if (label === 'required') assert.deepEqual(args, { city: 'Paris' });
      let name = '';
      let streamedArgs = '';
      let pieces = 0;
      let finish = null;
      for await (const chunk of await ai.chat.completions.create({ ...req, stream: true })) {
        const c = chunk.choices[0];
        if (!c) continue;
        for (const call of c.delta.tool_calls ?? []) {
          name += call.function?.name ?? '';
          streamedArgs += call.function?.arguments ?? '';
          pieces += 1;
        }
        if (c.finish_reason) finish = c.finish_reason;
      }
      assert.equal(name, 'get_weather');
      assert.equal(streamedArgs, m.tool_calls[0].function.arguments);
      assert.ok(pieces > 1, 'the arguments arrive in pieces after the name');
      assert.equal(finish, finishWanted);
    });
  }
});

describe('API key', () => {
  let server;
  before(async () => { server = await startServer(FIXTURE, ['--api-key', 'sk-good']); });
  after(async () => stop(server));

  test('a wrong or missing key is an AuthenticationError; the right one works', async () => {
    await assert.rejects(client(server.url, 'sk-bad').models.list(),
      (e) => e instanceof OpenAI.AuthenticationError && e.status === 401);
    const models = await client(server.url, 'sk-good').models.list();
    assert.equal(models.data[0].id, 'demo');
  });
});
