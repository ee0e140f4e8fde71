// A small Node.js adapter for Storm's multilang protocol (JSON), as Squall and
// Storm speak it.  No dependencies: copy it beside your component.
//
//   const {BasicBolt} = require('./multilang');
//   class Split extends BasicBolt {
//     process(tup, done) {
//       for (const word of tup.values[0].split(' ')) this.emit([word]);
//       done();
//     }
//   }
//   new Split().run();
//
// Emits ask the parent for the task ids they went to (the protocol's
// default); pass a callback to get them, or {needTaskIds: false} to skip
// the round trip.  Output is written in batches, once per input chunk.
'use strict';

const fs = require('fs');
const path = require('path');

const LEVELS = {trace: 0, debug: 1, info: 2, warn: 3, error: 4};

class Component {
  constructor() {
    this._lines = [];
    this._rest = '';
    this._out = [];
    this._flushScheduled = false;
    this._taskIdCallbacks = [];
    this._ready = false;
    this.conf = null;
    this.context = null;
  }

  // -- override ------------------------------------------------------------
  initialize(conf, context, done) { done(); }

  // -- call ----------------------------------------------------------------
  log(msg, level) {
    this._send({command: 'log', msg: String(msg), level: LEVELS[level || 'info']});
  }
  logTrace(msg) { this.log(msg, 'trace'); }
  logDebug(msg) { this.log(msg, 'debug'); }
  logInfo(msg) { this.log(msg, 'info'); }
  logWarn(msg) { this.log(msg, 'warn'); }
  logError(msg) { this.log(msg, 'error'); }
  reportError(msg) { this._send({command: 'error', msg: String(msg)}); }
  metric(name, params) { this._send({command: 'metrics', name: name, params: params}); }

  run() {
    process.stdin.setEncoding('utf8');
    process.stdin.on('data', (chunk) => this._onData(chunk));
    process.stdin.on('end', () => { this._flush(); process.exit(0); });
  }

  // -- protocol ------------------------------------------------------------
  _send(message) {
    this._out.push(JSON.stringify(message) + '\nend\n');
    if (!this._flushScheduled) {
      this._flushScheduled = true;
      setImmediate(() => this._flush());
    }
  }

  _flush() {
    this._flushScheduled = false;
    if (this._out.length) {
      const data = this._out.join('');
      this._out = [];
      process.stdout.write(data);
    }
  }

  _emitMessage(message, needTaskIds, callback) {
    if (message.task === undefined && needTaskIds !== false) {
      // The parent owes a task-id list for this emit; replies come in emit order.
      this._taskIdCallbacks.push(callback || (() => {}));
    } else if (message.task === undefined) {
      message.need_task_ids = false;
    }
    this._send(message);
  }

  _onData(chunk) {
    const text = this._rest + chunk;
    let start = 0;
    let nl;
    while ((nl = text.indexOf('\n', start)) >= 0) {
      let line = text.slice(start, nl);
      start = nl + 1;
      if (line.endsWith('\r')) line = line.slice(0, -1);
      if (line === 'end') {
        const body = this._lines.join('\n');
        this._lines = [];
        this._onMessage(JSON.parse(body));
      } else {
        this._lines.push(line);
      }
    }
    this._rest = text.slice(start);
  }

  _onMessage(message) {
    if (!this._ready) {
      this._ready = true;
      this.conf = message.conf;
      this.context = message.context;
      this.initialize(message.conf, message.context, () => {
        if (message.pidDir) fs.closeSync(fs.openSync(path.join(message.pidDir, String(process.pid)), 'w'));
        this._send({pid: process.pid});
      });
      return;
    }
    if (Array.isArray(message)) {
      const callback = this._taskIdCallbacks.shift();
      if (callback) callback(message);
      return;
    }
    this._handle(message);
  }
}

class Bolt extends Component {
  constructor() {
    super();
    this._current = null;
  }
  // process(tup, done): call done() when finished (done(err) to fail)
  process(tup, done) { done(); }
  processTick(tup, done) { done(); }

  emit(values, options, callback) {
    if (typeof options === 'function') { callback = options; options = {}; }
    options = options || {};
    const message = {command: 'emit', tuple: values};
    if (options.stream !== undefined) message.stream = options.stream;
    let anchors = options.anchors;
    if (anchors === undefined) anchors = this._autoAnchor && this._current ? [this._current.id] : [];
    message.anchors = anchors.map((a) => (typeof a === 'object' ? a.id : a));
    if (options.task !== undefined) message.task = options.task;
    this._emitMessage(message, options.needTaskIds, callback);
  }

  emitDirect(task, values, options) {
    this.emit(values, Object.assign({}, options || {}, {task: task}));
  }

  ack(tup) { this._send({command: 'ack', id: tup.id}); }
  fail(tup) { this._send({command: 'fail', id: tup.id}); }

  _handle(message) {
    const tup = {id: message.id, component: message.comp, stream: message.stream, task: message.task,
      values: message.tuple};
    if (tup.task === -1 && tup.stream === '__heartbeat') {
      this._send({command: 'sync'});
      return;
    }
    const tick = tup.task === -1 && tup.stream === '__tick';
    this._current = tup;
    const done = (err) => {
      if (err) {
        this.reportError(err.stack || String(err));
        if (this._autoAck) this.fail(tup);
      } else if (this._autoAck) {
        this.ack(tup);
      }
    };
    try {
      if (tick) this.processTick(tup, done); else this.process(tup, done);
    } catch (err) {
      done(err);
    }
    this._current = null;
  }
}
Bolt.prototype._autoAck = false;
Bolt.prototype._autoAnchor = false;

// Anchors emits to the tuple being processed and acks it when done() is called.
class BasicBolt extends Bolt {}
BasicBolt.prototype._autoAck = true;
BasicBolt.prototype._autoAnchor = true;

class Spout extends Component {
  // nextTuple(done), ack(id, done), fail(id, done), activate(done), deactivate(done)
  nextTuple(done) { done(); }
  ack(id, done) { done(); }
  fail(id, done) { done(); }
  activate(done) { done(); }
  deactivate(done) { done(); }

  emit(values, options, callback) {
    if (typeof options === 'function') { callback = options; options = {}; }
    options = options || {};
    const message = {command: 'emit', tuple: values};
    if (options.id !== undefined) message.id = options.id;
    if (options.stream !== undefined) message.stream = options.stream;
    if (options.task !== undefined) message.task = options.task;
    this._emitMessage(message, options.needTaskIds, callback);
  }

  emitDirect(task, values, options) {
    this.emit(values, Object.assign({}, options || {}, {task: task}));
  }

  _handle(message) {
    const done = (err) => {
      if (err) this.reportError(err.stack || String(err));
      this._send({command: 'sync'});
    };
    try {
      switch (message.command) {
        case 'next': this.nextTuple(done); break;
        case 'ack': this.ack(message.id, done); break;
        case 'fail': this.fail(message.id, done); break;
        case 'activate': this.activate(done); break;
        case 'deactivate': this.deactivate(done); break;
        default: this.logWarn('unknown command ' + JSON.stringify(message)); done();
      }
    } catch (err) {
      done(err);
    }
  }
}

module.exports = {Component, Bolt, BasicBolt, Spout};
