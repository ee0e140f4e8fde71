// Storm's split-sentence bolt, in Node.js on examples/multilang/resources/multilang.js.
'use strict';
const {BasicBolt} = require('./multilang');

class SplitSentence extends BasicBolt {
  process(tup, done) {
    for (const word of tup.values[0].split(' ')) {
      if (word) this.emit([word], {needTaskIds: false});
    }
    done();  // acks the sentence; the words were anchored to it
  }
}

new SplitSentence().run();
