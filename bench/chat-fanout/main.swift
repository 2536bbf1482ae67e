import Foundation

// chat-fanout: see `Options.help`.
exit(fanout(Options.parse(Array(CommandLine.arguments.dropFirst()))))
