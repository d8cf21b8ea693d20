// A minimal client of the graphql-transport-ws protocol
// (https://github.com/enisdenjo/graphql-ws/blob/master/PROTOCOL.md).
// Browsers cannot set headers on a WebSocket, so the access token travels
// in connection_init. One connection carries every subscription of the
// page; it reconnects with backoff and subscribes again, and renews the
// token when the server closes with 4401 (bad or expired credential).
import { token } from './api.js';

const initTimeout = 10_000;

export class SubscriptionClient {
  constructor(url) {
    this.url = url || `${location.protocol === 'https:' ? 'wss' : 'ws'}://${location.host}/graphql`;
    this.subs = new Map(); // id -> {payload, sink}
    this.nextId = 1;
    this.ws = null;
    this.acked = false;
    this.backoff = 500;
    this.forceRenew = false;
    this.onstate = () => {};
  }

  // subscribe starts a subscription; sink gets next(data), error(err),
  // complete(), and down() when the connection drops (it resubscribes
  // when it is back). It returns a function that stops it.
  subscribe(query, variables, sink) {
    const id = String(this.nextId++);
    this.subs.set(id, { payload: { query, variables }, sink });
    if (this.acked) this.send({ id, type: 'subscribe', payload: { query, variables } });
    else this.connect();
    return () => {
      if (!this.subs.delete(id)) return;
      if (this.acked) this.send({ id, type: 'complete' });
      if (this.subs.size === 0) this.close();
    };
  }

  send(msg) {
    if (this.ws && this.ws.readyState === WebSocket.OPEN) this.ws.send(JSON.stringify(msg));
  }

  async connect() {
    if (this.ws) return;
    let tok;
    try {
      tok = await token(this.forceRenew);
    } catch (err) {
      for (const s of this.subs.values()) s.sink.error(err);
      return;
    }
    this.forceRenew = false;
    if (this.ws) return;
    const ws = new WebSocket(this.url, 'graphql-transport-ws');
    this.ws = ws;
    const timer = setTimeout(() => ws.close(4408, 'connection_init timed out'), initTimeout);
    ws.onopen = () => {
      ws.send(JSON.stringify({ type: 'connection_init', payload: { Authorization: `Bearer ${tok}` } }));
    };
    ws.onmessage = (ev) => {
      let msg;
      try { msg = JSON.parse(ev.data); } catch { return; }
      switch (msg.type) {
        case 'connection_ack':
          clearTimeout(timer);
          this.acked = true;
          this.backoff = 500;
          this.onstate('open');
          for (const [id, s] of this.subs) this.send({ id, type: 'subscribe', payload: s.payload });
          break;
        case 'ping':
          this.send({ type: 'pong' });
          break;
        case 'next': {
          const s = this.subs.get(msg.id);
          if (s) s.sink.next(msg.payload);
          break;
        }
        case 'error': {
          const s = this.subs.get(msg.id);
          if (s) { this.subs.delete(msg.id); s.sink.error(new Error((msg.payload && msg.payload[0] && msg.payload[0].message) || 'subscription refused')); }
          break;
        }
        case 'complete': {
          const s = this.subs.get(msg.id);
          if (s) { this.subs.delete(msg.id); s.sink.complete(); }
          break;
        }
        default:
      }
    };
    ws.onclose = (ev) => {
      clearTimeout(timer);
      this.ws = null;
      this.acked = false;
      if (this.subs.size === 0) return;
      this.onstate('reconnecting');
      for (const s of this.subs.values()) if (s.sink.down) s.sink.down();
      if (ev.code === 4403) {
        // Forbidden: another try with the same identity will not help.
        for (const s of this.subs.values()) s.sink.error(new Error(ev.reason || 'subscription forbidden'));
        this.subs.clear();
        return;
      }
      if (ev.code === 4401) this.forceRenew = true;
      setTimeout(() => this.connect(), this.backoff);
      this.backoff = Math.min(this.backoff * 2, 15_000);
    };
  }

  close() {
    if (this.ws) this.ws.close(1000, 'done');
    this.ws = null;
    this.acked = false;
  }
}
