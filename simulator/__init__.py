"""Replays an events.json file over MQTT, and generates realistic full-size files."""
