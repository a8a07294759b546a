/**
 * Preloaded (`node --require`) into a spawned `unimatrix machine run` by door-rules.test.ts; no
 * production code loads it. When the daemon's probe of the door named by UMX_TEST_HELD_DOOR fails,
 * it writes `probed <code>` on fd 3 (a socket pair to the test) and blocks the daemon on a read of
 * fd 3 before the door code hears the failure: the test changes the door in that window, with no
 * timing guess, then writes a byte to let the daemon go on.
 */
"use strict";
const { readSync, writeSync } = require("node:fs");
const net = require("node:net");

const door = process.env.UMX_TEST_HELD_DOOR;
const connect = net.connect;
net.connect = function heldConnect(...args) {
  const socket = connect.apply(this, args);
  if (door && args[0] === door)
    socket.prependOnceListener("error", (error) => {
      writeSync(3, `probed ${error.code}\n`);
      readSync(3, Buffer.alloc(1));
    });
  return socket;
};
