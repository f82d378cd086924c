'use strict';
// Sends messages with ali-ons and prints one {"event":"sent",...} line per message.
// Config: {nameSrv, group, messages: [{topic, tags?, keys?: [..], body, size?, delayLevel?}]}

const { Producer, Message } = require('ali-ons');
const httpclient = require('urllib');
const { readConfig, emit, sha1, makeBody, logger } = require('./common');

async function main() {
  const cfg = readConfig();
  const producer = new Producer({
    httpclient,
    logger,
    nameSrv: cfg.nameSrv,
    producerGroup: cfg.group || 'ALI_ONS_PG',
    instanceName: cfg.instanceName || `producer-${process.pid}`,
  });
  producer.on('error', err => emit('error', { message: String(err && err.message) }));
  await producer.ready();
  emit('ready', {});
  let index = 0;
  for (const m of cfg.messages) {
    const body = makeBody(m.body, m.size);
    const msg = m.tags === undefined ? new Message(m.topic, body) : new Message(m.topic, m.tags, body);
    if (m.keys) msg.keys = m.keys;
    if (m.delayLevel) msg.delayTimeLevel = m.delayLevel;
    if (m.properties) {
      for (const [k, v] of Object.entries(m.properties)) msg.properties[k] = v;
    }
    const r = await producer.send(msg);
    emit('sent', {
      index,
      status: r.sendStatus,
      msgId: r.msgId,
      queueId: r.messageQueue && Number(r.messageQueue.queueId),
      brokerName: r.messageQueue && r.messageQueue.brokerName,
      queueOffset: r.queueOffset,
      bodyLen: body.length,
      bodySha1: sha1(body),
    });
    index++;
  }
  await producer.close();
  emit('done', { count: index });
}

main().then(() => process.exit(0), err => {
  emit('fatal', { message: String(err && err.stack || err) });
  process.exit(1);
});
