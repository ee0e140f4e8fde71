// The kitchen-sink test bolt on the Node.js adapter of examples/multilang.
// Its emits ask for task ids (the protocol's default), as Storm's storm.js does.
'use strict';
const path = require('path');
const {BasicBolt} = require(path.join(__dirname, '../../../examples/multilang/resources/multilang.js'));

class Kitchen extends BasicBolt {
  process(tup, done) {
    const [cmd, arg] = tup.values;
    switch (cmd) {
      case 'split':
        for (const word of arg.split(' ')) this.emit([word]);
        return done();
      case 'ids': {
        const ids = [];
        const streams = arg.map(() => 'counts').concat(['nowhere']);
        arg.concat([0]).forEach((n, i) => this.emit([n], {stream: streams[i]}, (taskIds) => {
          ids[i] = taskIds;
          if (ids.filter((x) => x !== undefined).length === streams.length) {
            this.emit([ids], {stream: 'ids', anchors: [tup]});
            done();
          }
        }));
        return undefined;
      }
      case 'direct':
        this.emitDirect(arg, [String(arg)], {stream: 'direct'});
        return done();
      case 'echo':
        this.emit([arg], {stream: 'echo'});
        return done();
      case 'failme':
        this.emit([arg], {stream: 'failme'});
        return done();
      case 'info':
        this.emit([JSON.stringify({context: this.context, component_name: this.context.componentid,
          task_id: this.context.taskid, pid: process.pid, cwd: process.cwd(), values_type: 'Array',
          fields: [], arg_via_field: arg, topology_name: this.conf['topology.name'],
          env: process.env.SQUALL_TEST_ENV || null,
          serializer: process.env.SQUALL_MULTILANG_SERIALIZER || null})], {stream: 'info'});
        return done();
      case 'log':
        this.logTrace('level trace'); this.logDebug('level debug'); this.logInfo('level info');
        this.logWarn('level warn'); this.logError('level error');
        this._send({command: 'log', msg: 'level missing'});
        this._send({command: 'log', msg: 'level odd', level: 'loud'});
        this._send({command: 'log', msg: 'level high', level: 9});
        return done();
      case 'error':
        this.reportError(arg);
        return done();
      case 'metrics':
        for (const [name, value] of arg) this.metric(name, value);
        return done();
      case 'crash':
        throw new Error(arg);
      case 'exit':
        process.stderr.write('exiting with ' + arg + '\n', () => process.exit(arg));
        return undefined;
      default:
        return done();
    }
  }

  processTick(tup, done) {
    this.emit([['tick', tup.values, tup.component, tup.stream, tup.task]], {stream: 'echo'});
    done();
  }
}

new Kitchen().run();
