package tooluse

import "bytes"

// sseParser splits a server-sent event stream into events' data, as the
// WHATWG HTML Living Standard's event stream interpretation does (see
// the package doc), across any split of the stream. It keeps a partial
// line and the current event's data, each at most max bytes: a longer
// event is skipped (malformed is set) and a longer line's excess is
// dropped.
type sseParser struct {
	max       int
	line      []byte // the partial line carried from the previous write
	lineOver  bool   // line reached max; the rest of it is dropped
	skipLF    bool   // the previous byte was a CR: an LF next ends no line
	first     bool   // no line ended yet: a leading BOM is dropped
	data      []byte // the current event's data, each value followed by LF
	hasData   bool
	over      bool // the current event's data is over max: skip it
	malformed bool
	// jsonLines: a line starting with "{" (a field named by the whole
	// line, which the standard ignores) is passed to emit as it is. The
	// Gemini SDKs read such a line as an error response, and the gateway
	// ends a Gemini stream it cuts with one.
	jsonLines bool
}

// end ends the stream: a last line and event not ended (by a line end,
// by a blank line) are taken as ended and the event dispatched, as the
// Gemini SDKs read a stream (the others drop such an event: a use in it
// is recorded all the same).
func (s *sseParser) end(emit func([]byte)) {
	if len(s.line) > 0 || s.lineOver {
		s.handleLine(s.line, emit)
		s.line, s.lineOver = s.line[:0], false
	}
	s.handleLine(nil, emit)
}

// write consumes p, calling emit with each dispatched event's data. The
// slice passed to emit is valid only during the call.
func (s *sseParser) write(p []byte, emit func([]byte)) {
	for len(p) > 0 {
		if s.skipLF {
			s.skipLF = false
			if p[0] == '\n' {
				p = p[1:]
				continue
			}
		}
		i := bytes.IndexByte(p, '\n')
		end := i
		if end < 0 {
			end = len(p)
		}
		if j := bytes.IndexByte(p[:end], '\r'); j >= 0 {
			i = j
		}
		if i < 0 {
			s.carry(p)
			return
		}
		line := p[:i]
		if len(s.line) > 0 || s.lineOver {
			s.carry(line)
			line = s.line
		}
		s.skipLF = p[i] == '\r'
		p = p[i+1:]
		s.handleLine(line, emit)
		s.line, s.lineOver = s.line[:0], false
	}
}

// carry keeps b as part of the partial line, up to max bytes.
func (s *sseParser) carry(b []byte) {
	if room := s.max - len(s.line); len(b) > room {
		b = b[:max(room, 0)]
		s.lineOver, s.malformed = true, true
	}
	s.line = append(s.line, b...)
}

func (s *sseParser) handleLine(line []byte, emit func([]byte)) {
	if s.first {
		s.first = false
		line = bytes.TrimPrefix(line, []byte("\xef\xbb\xbf"))
	}
	over := s.lineOver || len(line) > s.max // a line over max, whole or carried
	if over {
		s.malformed = true
	}
	if len(line) == 0 && !over {
		if s.hasData && !s.over {
			emit(s.data[:len(s.data)-1])
		}
		s.data, s.hasData, s.over = s.data[:0], false, false
		if cap(s.data) > 64<<10 {
			s.data = nil // do not hold a large event's buffer for the rest of the stream
		}
		return
	}
	if len(line) > 0 && line[0] == ':' {
		return // a comment
	}
	if s.jsonLines && len(line) > 0 && line[0] == '{' && !over {
		emit(line) // a JSON line outside any field (see sseParser.jsonLines)
		return
	}
	field, value := line, []byte(nil)
	if i := bytes.IndexByte(line, ':'); i >= 0 {
		field, value = line[:i], line[i+1:]
		if len(value) > 0 && value[0] == ' ' {
			value = value[1:]
		}
	}
	switch string(field) {
	case "data":
	case "event", "id", "retry":
		return // they do not matter here
	default:
		// No provider writes another field: the body may be no event
		// stream at all (a JSON body labelled as one, which the Python
		// SDKs read as JSON).
		s.malformed = true
		return
	}
	if s.over {
		return
	}
	if over || len(s.data)+len(value)+1 > s.max {
		s.over, s.malformed = true, true
		s.data = nil
		return
	}
	s.data = append(append(s.data, value...), '\n')
	s.hasData = true
}
