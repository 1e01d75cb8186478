"""A small synthetic workload of our own, used only when the BFCL data is unavailable.

Not real data: three short sessions over eight invented note-taking and mail tools, written in
BFCL's shapes (tool docs with ``"type": "dict"`` parameters and a ``response`` schema; ground
truth as call strings) so they go through the same code path. Always labelled ``"synthetic"``.
"""

from __future__ import annotations

from typing import Any

__all__ = ["SYNTHETIC_SESSIONS", "SYNTHETIC_TOOLS"]


def _tool(name: str, description: str, params: dict[str, Any], required: list[str],
          response: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": name,
        "description": "This tool belongs to the NotesAPI, a synthetic note-taking and mail "
        "service used by the stableprompt demo when no real workload is available. Tool "
        f"description: {description}",
        "parameters": {"type": "dict", "properties": params, "required": required},
        "response": {"type": "dict", "properties": response},
    }


def _s(description: str) -> dict[str, str]:
    return {"type": "string", "description": description}


SYNTHETIC_TOOLS: tuple[dict[str, Any], ...] = (
    _tool("list_notes", "List the titles of all notes in a folder, newest first.",
          {"folder": _s("Folder to list, for example 'work' or 'personal'."),
           "limit": {"type": "integer", "description": "Maximum number of titles to return.",
                     "default": 20}},
          ["folder"],
          {"titles": {"type": "array", "items": {"type": "string"},
                      "description": "Note titles."}}),
    _tool("read_note", "Read the full text of one note.",
          {"folder": _s("Folder holding the note."), "title": _s("Exact note title.")},
          ["folder", "title"],
          {"text": _s("The note's text."), "words": {"type": "integer",
                                                      "description": "Word count."}}),
    _tool("create_note", "Create a new note with a title and text.",
          {"folder": _s("Folder to create the note in."), "title": _s("Title of the new note."),
           "text": _s("Text of the new note.")},
          ["folder", "title", "text"],
          {"created": {"type": "boolean", "description": "Whether the note was created."}}),
    _tool("append_to_note", "Append a line of text to the end of an existing note.",
          {"folder": _s("Folder holding the note."), "title": _s("Exact note title."),
           "text": _s("Line to append.")},
          ["folder", "title", "text"],
          {"words": {"type": "integer", "description": "Word count after appending."}}),
    _tool("search_notes", "Search all notes for a phrase and return matching titles.",
          {"query": _s("Phrase to search for, case-insensitive."),
           "folder": _s("Restrict the search to this folder; omit to search everywhere.")},
          ["query"],
          {"matches": {"type": "array", "items": {"type": "string"},
                       "description": "Titles of matching notes."}}),
    _tool("move_note", "Move a note to another folder.",
          {"title": _s("Exact note title."), "source": _s("Folder holding the note now."),
           "destination": _s("Folder to move the note to.")},
          ["title", "source", "destination"],
          {"moved": {"type": "boolean", "description": "Whether the note was moved."}}),
    _tool("send_email", "Send an email with the given subject and body to one recipient.",
          {"to": _s("Recipient email address."), "subject": _s("Subject line."),
           "body": _s("Plain-text body.")},
          ["to", "subject", "body"],
          {"message_id": _s("Identifier of the sent message."),
           "sent": {"type": "boolean", "description": "Whether the message was sent."}}),
    _tool("count_words", "Count the words in a piece of text.",
          {"text": _s("Text to count.")}, ["text"],
          {"words": {"type": "integer", "description": "Number of words."}}),
)

SYNTHETIC_SESSIONS: tuple[tuple[str, tuple[dict[str, Any], ...],
                                tuple[tuple[str, tuple[str, ...]], ...]], ...] = (
    ("synthetic_0", SYNTHETIC_TOOLS, (
        ("What notes do I have in my work folder?", ("list_notes(folder='work')",)),
        ("Open the one called 'Quarterly plan' and tell me how long it is.",
         ("read_note(folder='work', title='Quarterly plan')",)),
        ("Add the line 'Review hiring budget' to it, then move it to the archive folder.",
         ("append_to_note(folder='work', title='Quarterly plan', text='Review hiring budget')",
          "move_note(title='Quarterly plan', source='work', destination='archive')")),
    )),
    ("synthetic_1", SYNTHETIC_TOOLS, (
        ("Find every note that mentions 'dentist'.", ("search_notes(query='dentist')",)),
        ("Read the first match from my personal folder, 'Appointments'.",
         ("read_note(folder='personal', title='Appointments')",)),
        ("Create a note 'Call dentist' in personal saying 'Reschedule the cleaning', and email "
         "myself at me@example.com with the same text and subject 'Reminder'.",
         ("create_note(folder='personal', title='Call dentist', text='Reschedule the cleaning')",
          "send_email(to='me@example.com', subject='Reminder', body='Reschedule the cleaning')")),
        ("How many words is 'Reschedule the cleaning'?",
         ("count_words(text='Reschedule the cleaning')",)),
    )),
    ("synthetic_2", SYNTHETIC_TOOLS, (
        ("List my ideas folder, at most 5 notes.", ("list_notes(folder='ideas', limit=5)",)),
        ("Search the ideas folder for 'garden' and read the note 'Garden layout'.",
         ("search_notes(query='garden', folder='ideas')",
          "read_note(folder='ideas', title='Garden layout')")),
        ("Append 'Plant tomatoes by the fence' to it and send it to sam@example.com with the "
         "subject 'Garden'.",
         ("append_to_note('ideas', 'Garden layout', 'Plant tomatoes by the fence')",
          "send_email(to='sam@example.com', subject='Garden', "
          "body='Plant tomatoes by the fence')")),
    )),
)
