'use strict';
// Consumes with ali-ons and prints one {"event":"msg",...} line per delivery (including redeliveries).
// Config: {nameSrv, group, topic, subExpression?, expect, timeoutMs?, failUntil?: {<body prefix>: n},
//          consumeFromWhere?, rebalanceInterval?, isBroadcast?, maxReconsumeTimes?, instanceName?}
// A message whose body starts with a key of failUntil makes the handler throw while its reconsumeTimes < n,
// which drives ali-ons into CONSUMER_SEND_MSG_BACK. The script exits after `expect` successful deliveries
// (exit 0) or after timeoutMs (exit 3).

const { Consumer } = require('ali-ons');
const httpclient = require('urllib');
const { readConfig, emit, sha1, logger } = require('./common');

async function main() {
  const cfg = readConfig();
  const failUntil = cfg.failUntil || {};
  const consumer = new Consumer({
    httpclient,
    logger,
    nameSrv: cfg.nameSrv,
    consumerGroup: cfg.group,
    instanceName: cfg.instanceName || `consumer-${process.pid}`,
    consumeFromWhere: cfg.consumeFromWhere || 'CONSUME_FROM_FIRST_OFFSET',
    isBroadcast: !!cfg.isBroadcast,
    rebalanceInterval: cfg.rebalanceInterval || 1000,
    // %RETRY%<group> gets its route only after the first heartbeat: poll the NameServer often.
    pollNameServerInteval: cfg.pollNameServerInterval || 1000,
    persistConsumerOffsetInterval: cfg.persistConsumerOffsetInterval || 1000,
    maxReconsumeTimes: cfg.maxReconsumeTimes === undefined ? 16 : cfg.maxReconsumeTimes,
  });
  consumer.on('error', err => emit('error', { message: String(err && err.message) }));

  let ok = 0;
  let finish;
  const finished = new Promise(resolve => { finish = resolve; });
  const timer = setTimeout(() => finish('timeout'), cfg.timeoutMs || 60000);

  consumer.subscribe(cfg.topic, cfg.subExpression || '*', async msg => {
    const body = msg.body || Buffer.alloc(0);
    const text = body.slice(0, 64).toString('utf8');
    const rule = Object.keys(failUntil).find(prefix => text.startsWith(prefix));
    const willFail = rule !== undefined && msg.reconsumeTimes < failUntil[rule];
    emit('msg', {
      topic: msg.topic,
      tags: msg.tags === undefined ? null : msg.tags,
      keys: msg.keys === undefined ? null : msg.keys,
      msgId: msg.msgId,
      queueId: msg.queueId,
      queueOffset: msg.queueOffset,
      reconsumeTimes: msg.reconsumeTimes,
      bodyLen: body.length,
      bodySha1: sha1(body),
      bodyHead: text,
      properties: msg.properties,
      failed: willFail,
    });
    if (willFail) {
      throw new Error(`interop: failing on purpose (reconsumeTimes=${msg.reconsumeTimes})`);
    }
    ok++;
    if (cfg.expect && ok >= cfg.expect) finish('done');
  });
  await consumer.ready();
  emit('ready', {});

  const why = await finished;
  clearTimeout(timer);
  // Give ali-ons one persist cycle so committed offsets reach the broker before we leave.
  await new Promise(r => setTimeout(r, cfg.lingerMs === undefined ? 1500 : cfg.lingerMs));
  await consumer.close();
  emit('done', { reason: why, ok });
  return why === 'done' ? 0 : 3;
}

main().then(code => process.exit(code), err => {
  emit('fatal', { message: String(err && err.stack || err) });
  process.exit(1);
});
