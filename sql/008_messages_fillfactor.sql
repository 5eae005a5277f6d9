-- Room on each page of messages for a row's next version: the send claim changes no indexed column,
-- so with room on its page it is a HOT update (no new entry in any of the table's seven indexes,
-- a fraction of the WAL); the later updates of a message mostly find room there too. Existing pages
-- keep their fill; new ones are filled to 70%.
ALTER TABLE messages SET (fillfactor = 70);
