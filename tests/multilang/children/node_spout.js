// The kitchen-sink test spout on the Node.js adapter (see pystorm_spout.py).
'use strict';
const path = require('path');
const {Spout} = require(path.join(__dirname, '../../../examples/multilang/resources/multilang.js'));

class Kitchen extends Spout {
  initialize(conf, context, done) {
    this.items = conf['test.spout.items'] || [];
    this.replay = conf['test.spout.replay'] || false;
    this.todo = this.items.slice();
    done();  // sends the pid: only then may the child say anything else
    this.event(['started', process.pid]);
  }
  event(what) { this.emit([JSON.stringify(what)], {stream: 'events', needTaskIds: false}); }
  activate(done) { this.event(['activate']); done(); }
  deactivate(done) { this.event(['deactivate']); done(); }
  nextTuple(done) {
    if (!this.todo.length) return done();
    const [id, sentence] = this.todo.shift();
    if (sentence === 'EMPTY') return done();
    if (sentence === 'ASK') {
      this.emit([sentence], {id: id}, (ids) => { this.event(['ids', ids]); done(); });
      return undefined;
    }
    this.emit([sentence], id === null ? {} : {id: id});
    return done();
  }
  ack(id, done) { this.event(['ack', id]); done(); }
  fail(id, done) {
    this.event(['fail', id]);
    if (this.replay) {
      const item = this.items.find(([i]) => JSON.stringify(i) === JSON.stringify(id));
      if (item) this.todo.push(item);
    }
    done();
  }
}

new Kitchen().run();
