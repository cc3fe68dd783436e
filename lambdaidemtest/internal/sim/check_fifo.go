package sim

import (
	"slices"
)

// inOrder checks FIFO order as a handler starts for message id: every
// message of its group sent before it is finished (deleted from the
// queue) or earlier in this very batch (the invocation report checks how
// it ended), and no later-sent message of its group ran before it in this
// invocation.
func (s *Scenario) inOrder(id string) {
	if !s.Cfg.FIFO || s.w.cur == nil {
		return
	}
	inv := s.inv[s.w.cur.owner]
	if inv == nil {
		return
	}
	pos := slices.IndexFunc(inv.batch, func(m *Message) bool { return m.ID == id })
	if pos < 0 {
		return
	}
	m := inv.batch[pos]
	for _, e := range s.src.EarlierUnfinished(m) {
		if !slices.Contains(inv.batch[:pos], e) {
			s.violate(InvFIFO, "FIFO order: message %s of group %s runs while %s, sent before it, is unfinished and not in this batch", id, m.GroupID, e.ID)
		}
	}
	if inv.lastRun == nil {
		inv.lastRun = map[string]int{}
	}
	if last := inv.lastRun[m.GroupID]; last > m.Seq {
		s.violate(InvFIFO, "FIFO order: message %s of group %s runs after a message sent after it (send order %d before %d)", id, m.GroupID, last, m.Seq)
	}
	inv.lastRun[m.GroupID] = m.Seq
}

// beforeDelete checks FIFO order as the event source acknowledges m: no
// message of its group sent before it may still be in the queue.
func (s *Scenario) beforeDelete(m *Message) {
	for _, e := range s.src.EarlierUnfinished(m) {
		s.violate(InvFIFO, "FIFO order: message %s of group %s is acknowledged while %s, sent before it, is unfinished", m.ID, m.GroupID, e.ID)
	}
}
