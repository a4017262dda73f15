package sqlite

// memorySchema is migration 2: memories and working state.
//
// A memory's id is memory.NewID: it begins with its creation time in
// milliseconds, then random bits (IDs made by earlier versions are
// wholly random).
//
// memories_fts is a contentless FTS5 table (contentless_delete=1) whose
// rowid is memories.id; it is written in the same transaction as the row
// it indexes. It indexes the text after ftsText (each CJK character and
// each symbol is its own token), so the indexed form differs from the
// stored text, which is kept byte for byte only in memories.text.
const memorySchema = `
CREATE TABLE memories (
	id            INTEGER PRIMARY KEY,   -- random, positive; shown as 16 hex digits
	tenant        TEXT NOT NULL,
	agent         TEXT NOT NULL,
	kind          TEXT NOT NULL,
	key           TEXT NOT NULL,         -- '' when none
	text          TEXT NOT NULL,         -- byte for byte as remembered
	tags          TEXT NOT NULL,         -- JSON array of strings
	hash          BLOB NOT NULL,         -- SHA-256 of kind, key and text (contentHash)
	session       TEXT NOT NULL,         -- pod that remembered it
	created_at    INTEGER NOT NULL,      -- unix milliseconds
	superseded_by INTEGER,               -- memories.id of the replacement, NULL while active
	superseded_at INTEGER                -- unix milliseconds
) STRICT;
CREATE UNIQUE INDEX memories_active_hash ON memories (tenant, agent, hash)
	WHERE superseded_by IS NULL;
CREATE UNIQUE INDEX memories_active_key ON memories (tenant, agent, kind, key)
	WHERE superseded_by IS NULL AND key <> '';
CREATE INDEX memories_newest ON memories (tenant, agent, created_at);
CREATE INDEX memories_kind_newest ON memories (tenant, agent, kind, created_at);

CREATE VIRTUAL TABLE memories_fts USING fts5(
	text, meta,                          -- meta: key and tags
	content = '', contentless_delete = 1,
	tokenize = 'unicode61 remove_diacritics 2'
);

CREATE TABLE memory_state (
	tenant           TEXT NOT NULL,
	agent            TEXT NOT NULL,
	name             TEXT NOT NULL,
	version          INTEGER NOT NULL,   -- 0 until first written
	state            BLOB,               -- JSON value, NULL at version 0
	updated_at       INTEGER,            -- unix milliseconds
	updated_by       TEXT,               -- session
	lease_epoch      INTEGER NOT NULL,   -- epoch of the last lease granted; only grows
	lease_holder     TEXT,               -- memory.HolderKey (session/pod UID), NULL when released
	lease_identity   TEXT,               -- holder's apikey.Identity as JSON
	lease_expires_at INTEGER,            -- unix milliseconds
	PRIMARY KEY (tenant, agent, name)
) STRICT, WITHOUT ROWID;
`
