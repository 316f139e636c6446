"""The office domain: email, calendar, reminders, to-do tasks and contacts.

Siblings on purpose: sending vs. searching email, scheduling a meeting vs. reading the calendar
vs. finding a common free time, a reminder at a time vs. a to-do item, adding vs. listing tasks,
and finding vs. adding a contact. Nothing is sent or stored: every tool restates its parameters.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from toolwire import OrchestratorActivatedTool, ToolExecutionResult


def _done(what: str) -> ToolExecutionResult:
    return ToolExecutionResult.context(f"{what} (synthetic bench tool: nothing was changed).")


class OutgoingEmail(BaseModel):
    to: str = Field(description="Recipient: a name or an email address")
    subject: str | None = Field(default=None, description="Subject line, if given")
    body: str = Field(description="What the email should say")


class SendEmailTool(OrchestratorActivatedTool[OutgoingEmail]):
    """Sends an email to someone."""

    def executable_instruction(self) -> str:
        return "Does the message ask to write and send an email to someone?"

    def execute_with_result(self, params: OutgoingEmail, text: str) -> ToolExecutionResult:
        return _done(
            f"Email to {params.to} ({params.subject or 'no subject'}) would say: {params.body}"
        )


class MailboxQuery(BaseModel):
    words: str = Field(description="Sender, subject or words to look for")
    period: str | None = Field(default=None, description="When the emails arrived, if given")


class SearchEmailTool(OrchestratorActivatedTool[MailboxQuery]):
    """Searches the mailbox for emails already received, by sender, subject or words."""

    def executable_instruction(self) -> str:
        return "Does the message ask to find emails already in the user's mailbox?"

    def execute_with_result(self, params: MailboxQuery, text: str) -> ToolExecutionResult:
        return _done(f"Mailbox search for {params.words!r} ({params.period or 'any time'})")


class MeetingRequest(BaseModel):
    attendees: list[str] = Field(description="The people invited")
    start: str = Field(description="Day and time the meeting starts")
    topic: str | None = Field(default=None, description="What the meeting is about")


class ScheduleMeetingTool(OrchestratorActivatedTool[MeetingRequest]):
    """Puts a meeting with other people into the calendar at a given day and time."""

    def executable_instruction(self) -> str:
        return (
            "Does the message ask to schedule a meeting or call with other people at a given time?"
        )

    def execute_with_result(self, params: MeetingRequest, text: str) -> ToolExecutionResult:
        people = ", ".join(params.attendees)
        return _done(f"Meeting with {people} at {params.start} about {params.topic}")


class Day(BaseModel):
    day: str = Field(description="The day (or part of a day) asked about")


class CalendarLookupTool(OrchestratorActivatedTool[Day]):
    """Shows what is already in the user's calendar on a day."""

    def executable_instruction(self) -> str:
        return "Does the message ask what is already in the user's calendar on some day?"

    def execute_with_result(self, params: Day, text: str) -> ToolExecutionResult:
        return _done(f"Calendar entries on {params.day}")


class AvailabilityQuery(BaseModel):
    attendees: list[str] = Field(description="The people who must all be free")
    duration_minutes: int | None = Field(default=None, description="Length of the slot needed")
    within: str | None = Field(default=None, description="The day or week to search")


class FindFreeSlotTool(OrchestratorActivatedTool[AvailabilityQuery]):
    """Finds a time when several people are all free, without booking anything."""

    def executable_instruction(self) -> str:
        return "Does the message ask to find a time when several people are all free?"

    def execute_with_result(self, params: AvailabilityQuery, text: str) -> ToolExecutionResult:
        people = ", ".join(params.attendees)
        return _done(f"Free slots of {people} ({params.duration_minutes} min, {params.within})")


class ReminderRequest(BaseModel):
    what: str = Field(description="What to be reminded of")
    when: str = Field(description="When the reminder should go off")


class SetReminderTool(OrchestratorActivatedTool[ReminderRequest]):
    """Sets a reminder that alerts the user at a given time."""

    def executable_instruction(self) -> str:
        return "Does the message ask to be reminded of something at a particular time?"

    def execute_with_result(self, params: ReminderRequest, text: str) -> ToolExecutionResult:
        return _done(f"Reminder {params.what!r} at {params.when}")


class NewTask(BaseModel):
    title: str = Field(description="What has to be done")
    due: str | None = Field(default=None, description="Due date, if given")


class CreateTaskTool(OrchestratorActivatedTool[NewTask]):
    """Adds an item to the user's to-do list."""

    def executable_instruction(self) -> str:
        return "Does the message ask to add an item to the user's to-do list?"

    def execute_with_result(self, params: NewTask, text: str) -> ToolExecutionResult:
        return _done(f"To-do item {params.title!r} (due {params.due or 'any time'})")


class TaskFilter(BaseModel):
    due: str | None = Field(default=None, description="Only tasks due by this day, if given")


class ListTasksTool(OrchestratorActivatedTool[TaskFilter]):
    """Lists the open items on the user's to-do list."""

    def executable_instruction(self) -> str:
        return "Does the message ask which items are on the user's to-do list?"

    def execute_with_result(self, params: TaskFilter, text: str) -> ToolExecutionResult:
        return _done(f"Open to-do items (due by {params.due or 'any time'})")


class ContactName(BaseModel):
    name: str = Field(description="The person or business looked up")


class FindContactTool(OrchestratorActivatedTool[ContactName]):
    """Looks up a saved contact's phone number, email address or other details."""

    def executable_instruction(self) -> str:
        return "Does the message ask for the details of a contact saved in the address book?"

    def execute_with_result(self, params: ContactName, text: str) -> ToolExecutionResult:
        return _done(f"Contact details of {params.name}")


class NewContact(BaseModel):
    name: str = Field(description="The person or business to save")
    phone: str | None = Field(default=None, description="Phone number, if given")
    email: str | None = Field(default=None, description="Email address, if given")


class AddContactTool(OrchestratorActivatedTool[NewContact]):
    """Saves a new contact, with phone number or email address, in the address book."""

    def executable_instruction(self) -> str:
        return "Does the message ask to save a new contact in the address book?"

    def execute_with_result(self, params: NewContact, text: str) -> ToolExecutionResult:
        return _done(f"New contact {params.name} ({params.phone}, {params.email})")
