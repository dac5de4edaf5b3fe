from scalemodel.cli import main

main()
