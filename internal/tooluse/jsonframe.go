package tooluse

import "bytes"

// Modes of a jsonFramer, decided by the body's first non-space byte.
const (
	modeStart = iota // only white space so far
	modeWhole        // one JSON document, parsed at the end
	modeArray        // a JSON array whose elements are parsed one by one
	modeSkip         // over max: the rest is ignored
)

// jsonFramer splits a JSON body into the documents a Scanner parses: the
// whole body (up to max bytes), or, when array is set and the body is a
// JSON array, each element (each up to max bytes) as soon as it ends.
// It tracks only strings and nesting, not full JSON syntax: each
// document is parsed afterwards.
type jsonFramer struct {
	max       int
	array     bool // split a top-level array into its elements
	mode      int
	buf       []byte // the whole body, or the current element
	depth     int
	inStr     bool
	esc       bool
	inElem    bool // an element is being captured
	elemOver  bool // the current element is over max
	closed    bool // the top-level array ended
	malformed bool
}

const space = " \t\r\n"

// write consumes p, calling emit with each array element as it ends.
func (j *jsonFramer) write(p []byte, emit func([]byte)) {
	if j.mode == modeStart {
		p = bytes.TrimLeft(p, space)
		if len(p) == 0 {
			return
		}
		j.mode = modeWhole
		if j.array && p[0] == '[' {
			j.mode = modeArray
		}
	}
	switch j.mode {
	case modeWhole:
		if len(j.buf)+len(p) > j.max {
			j.mode, j.buf, j.malformed = modeSkip, nil, true
			return
		}
		j.buf = append(j.buf, p...)
	case modeArray:
		j.scan(p, emit)
	}
}

// end parses the whole body, if that is the mode.
func (j *jsonFramer) end(emit func([]byte)) {
	if j.mode == modeWhole {
		emit(j.buf)
		j.buf = nil
	}
}

// scan walks p in array mode. Elements are the values at depth 1; the
// opening bracket is depth 0 to 1.
func (j *jsonFramer) scan(p []byte, emit func([]byte)) {
	start := -1 // where the current element starts in p, if it does
	if j.inElem {
		start = 0
	}
	for i := 0; i < len(p); i++ {
		c := p[i]
		if j.inStr {
			// Skip to the next quote or backslash.
			if j.esc {
				j.esc = false
				continue
			}
			k := indexQuoteOrBackslash(p[i:])
			if k < 0 {
				i = len(p)
				break
			}
			i += k
			if p[i] == '\\' {
				j.esc = true
			} else {
				j.inStr = false
			}
			continue
		}
		if j.closed {
			if !isSpace(c) {
				j.malformed = true
			}
			continue
		}
		switch c {
		case ' ', '\t', '\r', '\n':
		case '"':
			j.inStr = true
			if j.depth == 1 {
				j.malformed = true // a string element: not a response
			}
		case '{', '[':
			j.depth++
			if j.depth == 2 {
				start, j.inElem, j.elemOver = i, true, false
			}
		case '}', ']':
			j.depth--
			switch {
			case j.depth == 1:
				j.appendElem(p[start : i+1])
				if !j.elemOver {
					emit(j.buf)
				}
				j.buf, j.inElem, start = j.buf[:0], false, -1
				if cap(j.buf) > 64<<10 {
					j.buf = nil
				}
			case j.depth == 0:
				j.closed = true
			case j.depth < 0:
				j.closed, j.malformed = true, true
			}
		case ',':
		default:
			if j.depth == 1 {
				j.malformed = true // a number or literal element
			}
		}
	}
	if j.inElem && start >= 0 {
		j.appendElem(p[start:])
	}
}

// appendElem adds b to the current element, up to max bytes.
func (j *jsonFramer) appendElem(b []byte) {
	if j.elemOver {
		return
	}
	if len(j.buf)+len(b) > j.max {
		j.elemOver, j.malformed, j.buf = true, true, nil
		return
	}
	j.buf = append(j.buf, b...)
}

func indexQuoteOrBackslash(b []byte) int {
	q := bytes.IndexByte(b, '"')
	end := q
	if end < 0 {
		end = len(b)
	}
	if k := bytes.IndexByte(b[:end], '\\'); k >= 0 {
		return k
	}
	return q
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\n' }
