// Drives `sps serve` with the official `openai` npm package: a completion, a streamed
// completion, a chat completion and a streamed chat completion, all greedy. Prints one JSON
// object with what the client received. Usage: node openai_client.mjs NODE_MODULES PORT KEY
import { createRequire } from 'node:module';
import path from 'node:path';

const [modules, port, apiKey] = process.argv.slice(2);
const require = createRequire(path.join(modules, 'noop.js'));
const mod = require('openai');
const OpenAI = mod.OpenAI ?? mod.default ?? mod;

const client = new OpenAI({ baseURL: `http://127.0.0.1:${port}/v1`, apiKey, maxRetries: 0, timeout: 60000 });
const model = (await client.models.list()).data[0].id;
const prompt = 'Hello';
const params = { model, max_tokens: 8, temperature: 0, seed: 1 };

const completion = await client.completions.create({ ...params, prompt });
let streamed = '';
for await (const chunk of await client.completions.create({ ...params, prompt, stream: true }))
  streamed += chunk.choices[0]?.text ?? '';

const messages = [{ role: 'user', content: 'Hi' }];
const chat = await client.chat.completions.create({ ...params, messages });
let chatStreamed = '';
for await (const chunk of await client.chat.completions.create({ ...params, messages, stream: true }))
  chatStreamed += chunk.choices[0]?.delta?.content ?? '';

let unauthorized = 0;
try {
  await new OpenAI({ baseURL: `http://127.0.0.1:${port}/v1`, apiKey: 'wrong', maxRetries: 0 }).models.list();
} catch (e) {
  unauthorized = e.status ?? -1;
}

console.log(JSON.stringify({
  model,
  completion: completion.choices[0].text,
  finish_reason: completion.choices[0].finish_reason,
  usage: completion.usage,
  streamed,
  chat: chat.choices[0].message.content,
  chat_streamed: chatStreamed,
  unauthorized,
}));
